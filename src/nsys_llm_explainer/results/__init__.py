"""Typed metric results: one module per metric that has one, holding only its frozen
dataclasses. They sit below the metrics, so that any reader (another metric, the diagnosis,
the rules, the writers) imports a result's type without importing the metric's code.

A metric returns MetricResult(id, result.to_json(), tables, notes, typed=result); readers ask
for the object by its type: `view.result(Serving)`, `ctx.typed(Serving)`, which return None
when the metric did not run."""
