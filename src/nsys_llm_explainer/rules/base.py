"""The rule interface: a stable id, a title, and a check function whose docstring is the
rule's documentation page (docs/rules.md is generated from it).

    NLE101 = Rule(id="NLE101", name="dominant-kernel", title="...", check=dominant_kernel)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from functools import cached_property
from typing import TypeVar

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diagnosis.accounting import Accounting
from nsys_llm_explainer.diagnosis.kernel_mix import category_of
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.labels import Labels, labels_for
from nsys_llm_explainer.model import (
    Affected,
    Cause,
    Confidence,
    Finding,
    MetricResult,
    Outcome,
    Schema,
    Severity,
    Skipped,
    round_pct,
    typed_result,
)
from nsys_llm_explainer.options import Options

R = TypeVar("R")


@frozen
class RuleInput:
    metrics: dict[str, Outcome]
    options: Options
    schema: Schema
    acct: Accounting = field(default_factory=Accounting)  # where each device's time went
    workload: str = "unknown"  # the workload metric's kind: advice is chosen by it

    def metric(self, metric_id: str) -> MetricResult | None:
        out = self.metrics.get(metric_id)
        return out if isinstance(out, MetricResult) else None

    def result(self, cls: type[R]) -> R | None:
        """The typed result (results/) of a metric, or None when it did not run."""
        return typed_result(self.metrics, cls)

    def skipped(self, metric_id: str) -> Skipped | None:
        out = self.metrics.get(metric_id)
        return out if isinstance(out, Skipped) else None

    @cached_property
    def kernel_label(self) -> Labels:
        """Full kernel name -> the label report.md shows (evidence names kernels by it)."""
        return labels_for(self.metrics)

    @cached_property
    def kernel_category(self) -> Callable[[str], str]:
        """Full kernel name -> its category: the categories metric's own table (a user's
        --kernel-categories file included), else the built-in table."""
        return category_of(self.metrics)


@frozen
class Rule:
    id: str
    name: str
    title: str
    check: Callable[[RuleInput, Rule], Iterable[Finding]]
    metric_ids: tuple[str, ...] = ()

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.check) or ""

    def finding(
        self,
        *,
        severity: Severity,
        confidence: Confidence,
        evidence: Sequence[str],
        recommendation: Sequence[str],
        title: str | None = None,
        affected: Sequence[Affected] = (),
        impact: tuple[int, float] | None = None,
        cause: Cause | None = None,
    ) -> Finding:
        """A finding; `impact` is (GPU ns at stake, share of the affected devices' windows)."""
        return Finding(
            rule_id=self.id,
            title=title or self.title,
            severity=severity,
            confidence=confidence,
            evidence=tuple(evidence),
            recommendation=tuple(recommendation),
            metric_ids=self.metric_ids,
            impact_ns=impact[0] if impact else None,
            impact_pct=round_pct(impact[1]) if impact else None,
            affected=tuple(affected),
            cause=cause,
        )

    def note(
        self, *, confidence: Confidence, evidence: Sequence[str], recommendation: Sequence[str],
        title: str | None = None,
    ) -> Finding:
        """A note about the capture or the data: no GPU time at stake, severity INFO."""
        return self.finding(
            severity=Severity.INFO,
            confidence=confidence,
            evidence=evidence,
            recommendation=recommendation,
            title=title,
        )


def pct(value: float) -> str:
    """A share in finding text (fmt.pct: 4.3%, 100%)."""
    return fmt.pct(value)


def ms(ns: int | float) -> str:
    """A duration in finding text: three significant digits in the unit that reads best
    (fmt.dur); tables keep fixed decimals."""
    return fmt.dur(ns)


def us(ns: int | float) -> str:
    """A short duration in finding text (fmt.dur: 4.10 µs, 30.0 µs)."""
    return fmt.dur(ns)


def dur(ns: int | float) -> str:
    """The unit that reads best (fmt.dur), as the GPU time at stake is written."""
    return fmt.dur(ns)


def shorten(name: str, limit: int = 100) -> str:
    """Long names (NVTX ranges) in evidence lines; kernels use RuleInput.kernel_label."""
    flat = " ".join(name.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
