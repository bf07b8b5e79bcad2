from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.results.serving import Serving
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, shorten

DOMINANT_PCT = 80.0
MIN_PHASES = 2  # with a single phase there is nothing to compare


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """One phase takes almost all attributed GPU kernel time.

    Phases come from `--phase-map` (e.g. prefill/decode); without one, from the serving
    iterations' phases (prefill, mixed, decode: the serving metric's kernel time per phase), else
    the top-level NVTX ranges stand in for phases. Fires (a note, severity info: it points where to look, it is not a
    defect) when at least two phases received kernel time and one of them holds >= 80% of
    the attributed kernel time.

    Example:

        NLE105 info: Phase "decode" takes 91.0% of attributed kernel time
        - decode: 910.000 ms of 1,000.000 ms attributed kernel time; prefill: 90.000 ms
    """
    res = view.metric("nvtx_attribution")
    if res is None:
        return
    s = view.result(Serving)
    if res.data["phases"]:
        rows = [(p["phase"], int(p["kernel_ns"])) for p in res.data["phases"]]
        source = "phase map"
    elif s is not None and s.phases:
        rows = [(p.phase, sum(p.categories.values())) for p in s.phases]
        source = "serving iterations"
    else:
        rows = [(r["name"], int(r["inclusive_kernel_ns"])) for r in res.data["top_level"]]
        source = "top-level NVTX ranges"
    rows = [r for r in rows if r[1] > 0]
    total = sum(ns for _, ns in rows)
    if len(rows) < MIN_PHASES or total <= 0:
        return
    name, ns = max(rows, key=lambda r: r[1])
    share = 100.0 * ns / total
    if share < DOMINANT_PCT:
        return
    others = "; ".join(
        f"{shorten(n, 40)}: {ms(v)}" for n, v in sorted(rows, key=lambda r: -r[1])[1:4]
    )
    yield rule.note(
        confidence=Confidence.LOW if source == "top-level NVTX ranges" else Confidence.MEDIUM,
        evidence=[
            f"{shorten(name, 60)}: {ms(ns)} of {ms(total)} kernel time attributed to {source}",
            f"others: {others}",
        ],
        recommendation=[
            f'Optimize inside "{shorten(name, 60)}" first: the other phases cannot move the total much.'
        ],
        title=f'Phase "{shorten(name, 60)}" takes {pct(share)} of attributed kernel time',
    )


RULE = Rule(
    id="NLE105",
    name="phase-dominates",
    title="One phase dominates kernel time",
    check=check,
    metric_ids=("nvtx_attribution", "serving"),
)
