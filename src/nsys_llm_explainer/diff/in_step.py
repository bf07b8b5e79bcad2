"""Steps in a diff: per-step changes from the work inside complete steps (report.json
`metrics.step_work`), and step latency per phase (report.json `metrics.steps`).

Both sides are read the same way: every figure is per complete step, from the steps the
steps metric found; kernels outside every step (capture edges, between steps) never enter.
Each change is a Hodges-Lehmann shift with its interval (shift(), below) over the per-step
series:

- step time, kernel time, GPU busy (union of the step's kernels), host time outside CUDA
  calls, kernels per step: one value per step;
- per kernel category: its time per step;
- per kernel name (matched as in kernels.py, a renamed group summed): its time per step and
  its time per call (the step's time of it / its calls in that step, over the steps where it
  ran).

`delta_ns` is the change per step in nanoseconds at the base median (what the change costs or
saves per step); the headline ranks changes by it.

How much a per-step figure changed, with a confidence interval: the Hodges-Lehmann shift.

Captures hold few steps (often 6 to 30), and step times are skewed by the odd slow step, so
a change is estimated without assuming a distribution:

- On logarithms (every value > 0): the estimate is the median of all n x m differences
  log(new_j) - log(base_i); exp() of it is the ratio new / base, reported as a percent change.
  A multiplicative change (every GEMM 30% slower) is a pure shift on this scale, whatever
  mix of step kinds (prefill, decode) both captures hold.
- On the values themselves (some value is 0, e.g. a kernel absent from some steps): the
  median of the differences new_j - base_i, reported against the base median (a percentage
  at or above -100%: the values are times and counts, never negative).

The interval is the distribution-free one that goes with the estimate (Lehmann 1963;
Hollander & Wolfe, Nonparametric Statistical Methods, ch. 4): the k-th smallest and k-th
largest of the sorted differences, where k - 1 is the largest count c with
P(U <= c) <= (1 - level) / 2 for the Mann-Whitney count U of two samples of sizes n, m.
P is exact (counted by dynamic programming) for n x m <= EXACT_LIMIT and from the normal
approximation with continuity correction beyond. When no count is small enough (n = m = 3:
the smallest tail is 1/20), no interval at `level` exists and the change is never called
beyond the noise. "Beyond the noise" means the interval excludes no change.

Medians are the sample's own median (numpy.median: the mean of the two middle values of an
even count), always shown with the sample size.

Step latency per phase (compare_steps), and whether a change exceeds the baseline's
step-to-step spread. Reads report.json `metrics.steps`: `phases` (a list of {phase, step_count, p50_ns, p90_ns,
optional p25_ns/p75_ns}, or an object keyed by phase) and, when present, `steps` (one
{phase, duration_ns} per step). A few key spellings are accepted so reports from nearby
versions still compare.

Noise: when both reports carry the work inside their complete steps (metrics.step_work),
each phase's step time change is a Hodges-Lehmann shift over the steps' latencies with its
interval (diff/py); beyond the noise means the interval excludes no change, and the medians
are the samples' own, with their sizes. Older reports: the median change (new p50 - base p50)
is compared with the baseline's interquartile range (p75 - p25, from the per-step durations
or the phase's p25/p75); a change within it is within the baseline spread."""

from __future__ import annotations

import functools
import math
from typing import Literal, NotRequired, TypedDict

import numpy as np

from nsys_llm_explainer.diff.load import (
    Side,
    StepDurationDoc,
    StepsDoc,
    StepsPhaseDoc,
    StepWorkNameDoc,
    json_pct,
    rel_pct,
)
from nsys_llm_explainer.frozen import frozen

LEVEL = 0.95
EXACT_LIMIT = 2_500  # n x m up to which the Mann-Whitney distribution is counted exactly
MIN_SAMPLES = 2


@frozen
class Shift:
    """The change from `base` to `new` samples. Percentages are of the base (ratio - 1 on the
    log scale; shift / base median on the value scale); None where it cannot be said."""

    scale: str  # "log" or "value"
    n_base: int
    n_new: int
    base_median: float
    new_median: float
    estimate: float  # log ratio ("log") or difference in the values' unit ("value")
    low: float | None  # interval bounds on the same scale; None: no interval at `level`
    high: float | None
    level: float

    @property
    def change_pct(self) -> float | None:
        return self._pct(self.estimate)

    @property
    def low_pct(self) -> float | None:
        return None if self.low is None else self._pct(self.low)

    @property
    def high_pct(self) -> float | None:
        return None if self.high is None else self._pct(self.high)

    @property
    def beyond_noise(self) -> bool:
        """The interval excludes zero (no change)."""
        if self.low is None or self.high is None:
            return False
        return self.low > 0 or self.high < 0

    @property
    def delta(self) -> float:
        """The change in the values' unit, at the base median (new - base, per sample)."""
        if self.scale == "log":
            return self.base_median * math.expm1(self.estimate)
        return self.estimate

    def _pct(self, x: float) -> float | None:
        if self.scale == "log":
            return 100.0 * math.expm1(x)
        if self.base_median <= 0:
            return None
        # the values are times and counts (never below 0): no change is below -100%
        return max(100.0 * x / self.base_median, -100.0)


def _tail_counts(n: int, m: int) -> np.ndarray:
    """Cumulative P(U <= u), u = 0 .. n*m, of the Mann-Whitney count for sizes n, m.

    The number of orderings with count u is the coefficient of q^u in the Gaussian binomial
    [n+m choose n]_q: F(i, j) = q^j F(i-1, j) + F(i, j-1), F(i, 0) = F(0, j) = 1."""
    return _tail_counts_cached(min(n, m), max(n, m))


@functools.lru_cache(maxsize=64)
def _tail_counts_cached(n: int, m: int) -> np.ndarray:
    size = n * m + 1
    prev = [np.zeros(size) for _ in range(m + 1)]  # F(0, j) = 1
    for j in range(m + 1):
        prev[j][0] = 1.0
    for _ in range(1, n + 1):
        cur = [np.zeros(size) for _ in range(m + 1)]
        cur[0][0] = 1.0  # F(i, 0) = 1
        for j in range(1, m + 1):
            # the largest value is a base one (it exceeds all j new ones: U grows by j) or a new one
            cur[j][j:] += prev[j][: size - j]
            cur[j] += cur[j - 1]
        prev = cur
    counts = prev[m]
    return np.cumsum(counts) / counts.sum()


def critical_count(n: int, m: int, level: float = LEVEL) -> int:
    """The largest c with P(U <= c) <= (1 - level) / 2, or -1 when none is (too few samples)."""
    alpha = (1.0 - level) / 2.0
    if n * m <= EXACT_LIMIT:
        cdf = _tail_counts(n, m)
        ok = np.flatnonzero(cdf <= alpha + 1e-12)
        return int(ok[-1]) if len(ok) else -1
    z = _normal_quantile(1.0 - alpha)
    mean = n * m / 2.0
    sd = math.sqrt(n * m * (n + m + 1) / 12.0)
    return max(int(math.floor(mean - z * sd - 0.5)), -1)


def _normal_quantile(p: float) -> float:
    """Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9
    after one Newton step on math.erf)."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
         1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
         6.680131188771972e01, -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
         -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
         3.754408661907416e00)
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    elif p <= 1 - lo:
        q = p - 0.5
        r = q * q
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / (
            ((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    else:
        q = math.sqrt(-2 * math.log(1 - p))
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    err = 0.5 * math.erfc(-x / math.sqrt(2)) - p
    return x - err * math.sqrt(2 * math.pi) * math.exp(x * x / 2)


def shift(base: np.ndarray | list[float], new: np.ndarray | list[float],
          level: float = LEVEL) -> Shift | None:
    """The Hodges-Lehmann change from `base` to `new`, or None with fewer than MIN_SAMPLES
    values on a side (NaN values are dropped)."""
    b = np.asarray(base, dtype=np.float64)
    n_ = np.asarray(new, dtype=np.float64)
    b, n_ = b[np.isfinite(b)], n_[np.isfinite(n_)]
    if len(b) < MIN_SAMPLES or len(n_) < MIN_SAMPLES:
        return None
    log = bool((b > 0).all() and (n_ > 0).all())
    x, y = (np.log(b), np.log(n_)) if log else (b, n_)
    diffs = np.sort((y[None, :] - x[:, None]).ravel())
    est = float(np.median(diffs))
    c = critical_count(len(b), len(n_), level)
    lo = hi = None
    if c >= 0:
        lo, hi = float(diffs[c]), float(diffs[len(diffs) - 1 - c])
    return Shift("log" if log else "value", len(b), len(n_), float(np.median(b)),
                 float(np.median(n_)), est, lo, hi, level)


STEP_FIGURES = (
    ("step_time", "Step time", "latency_ns", "ns"),
    ("kernel_time", "Kernel time in steps", "kernel_ns", "ns"),
    ("gpu_busy", "GPU busy in steps", "busy_ns", "ns"),
    ("host_time", "Host time outside CUDA calls", "host_ns", "ns"),
    ("kernels", "Kernels per step", "kernels", "count"),
)


@frozen
class Work:
    """One side's step_work, as arrays."""

    steps: int
    series_steps: int
    phases: list[str]
    per_step: dict[str, np.ndarray | None]
    names: dict[str, StepWorkNameDoc]  # name -> its metrics.step_work row
    series: dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (time, calls) per step, where kept
    categories: dict[str, np.ndarray]  # category -> time per step (series)
    kernel_ns: int
    outside_ns: int
    outside_kernels: int
    method: str | None


def read(side: Side) -> Work | str:
    m = side.metric("step_work")
    if m is None:
        return side.why_missing("step_work")
    per = m.get("per_step") or {}
    arrays: dict[str, np.ndarray | None] = {}
    for key in ("phase", "pid", "latency_ns", "kernel_ns", "kernels", "busy_ns", "host_ns"):
        v = per.get(key)
        arrays[key] = None if v is None else np.asarray(v, dtype=np.float64)
    if arrays["host_ns"] is not None:
        h = arrays["host_ns"]
        arrays["host_ns"] = np.where(h >= 0, h, np.nan)
    k = int(m.get("series_steps", 0))
    names: dict[str, StepWorkNameDoc] = {}
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for r in m.get("names", []):
        if "series_ns" in r:
            calls = r.get("series_calls", 0)
            series[str(r["name"])] = (np.asarray(r["series_ns"], dtype=np.float64),
                                      np.full(k, float(calls)) if isinstance(calls, int | float)
                                      else np.asarray(calls, dtype=np.float64))
        else:
            series.pop(str(r["name"]), None)  # a later row of the name without a series replaces it
        names[str(r["name"])] = r
    cats = {str(c["category"]): np.asarray(c["series_ns"], dtype=np.float64) for c in m.get("categories", [])}
    return Work(int(m["steps"]), k, list(m.get("phases", [])), arrays, names, series, cats, int(m["kernel_ns"]),
                int(m.get("outside_ns", 0)), int(m.get("outside_kernels", 0)), m.get("steps_method"))


class ChangeRow(TypedDict):
    """One change row of diff.json (in_step rows, a kernel's changes, the headline's step time)."""

    id: str
    kind: str
    label: str
    unit: str
    status: Literal["ok", "not_compared"]
    reason: str | None
    n_base: int | None
    n_new: int | None
    base_median: float | None
    new_median: float | None
    scale: str | None
    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    beyond_noise: bool
    delta_ns: float | None


class CategoryChangeRow(ChangeRow):
    """diff.json `in_step.categories`: a category's change of time per step, with its means."""

    category: str
    base_per_step_ns: float | None
    new_per_step_ns: float | None


def row(row_id: str, kind: str, label: str, unit: str, s: Shift | None, reason: str | None = None) -> ChangeRow:
    """One change row of diff.json (status not_compared with the reason when s is None)."""
    if s is None:
        return {"id": row_id, "kind": kind, "label": label, "unit": unit, "status": "not_compared",
                "reason": reason or "fewer than 2 steps on a side", "n_base": None, "n_new": None,
                "base_median": None, "new_median": None, "scale": None, "change_pct": None,
                "low_pct": None, "high_pct": None, "beyond_noise": False, "delta_ns": None}
    return {
        "id": row_id, "kind": kind, "label": label, "unit": unit, "status": "ok", "reason": None,
        "n_base": s.n_base, "n_new": s.n_new,
        "base_median": round(s.base_median, 3), "new_median": round(s.new_median, 3),
        "scale": s.scale, "change_pct": _r(s.change_pct), "low_pct": _r(s.low_pct),
        "high_pct": _r(s.high_pct), "beyond_noise": s.beyond_noise,
        "delta_ns": round(s.delta, 1) if unit == "ns" else None,
    }


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def step_rows(wb: Work, wn: Work) -> list[ChangeRow]:
    out = []
    for rid, label, key, unit in STEP_FIGURES:
        b, n = wb.per_step.get(key), wn.per_step.get(key)
        if b is None or n is None:
            out.append(row(rid, "step", label, unit, None, "not measured on "
                           + ("BASE" if b is None else "NEW") + " (no CUDA API calls joined to the steps)"))
            continue
        out.append(row(rid, "step", label, unit, shift(b, n)))
    return out


def phase_latency(w: Work) -> dict[str, np.ndarray]:
    lat = w.per_step["latency_ns"]
    ph = w.per_step["phase"]
    if lat is None or ph is None:
        return {}
    return {name: lat[ph == i] for i, name in enumerate(w.phases)}


def category_rows(wb: Work, wn: Work) -> list[CategoryChangeRow]:
    out: list[CategoryChangeRow] = []
    for cat in sorted(set(wb.categories) | set(wn.categories)):
        b = wb.categories.get(cat, np.zeros(wb.series_steps))
        n = wn.categories.get(cat, np.zeros(wn.series_steps))
        out.append({**row(f"category:{cat}", "category", cat, "ns", shift(b, n)), "category": cat,
                    "base_per_step_ns": round(float(b.mean()), 1) if len(b) else None,
                    "new_per_step_ns": round(float(n.mean()), 1) if len(n) else None})
    return out


def group_series(w: Work, names: str | None, sep: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Summed per-step (time, calls) series of the names of one kernel row; None when a name
    of it has no series in report.json (not among the names with the most time)."""
    if not names:
        return np.zeros(w.series_steps), np.zeros(w.series_steps)
    ns = np.zeros(w.series_steps)
    calls = np.zeros(w.series_steps)
    for name in names.split(sep):
        got = w.series.get(name)
        if got is None:
            return None
        ns += got[0]
        calls += got[1]
    return ns, calls


def per_call(ns: np.ndarray, calls: np.ndarray) -> np.ndarray:
    ran = calls > 0
    return ns[ran] / calls[ran]


class KernelChanges(TypedDict):
    time: ChangeRow  # of time per step
    per_call: ChangeRow  # of time per call


def kernel_changes(wb: Work, wn: Work, base_names: str | None, new_names: str | None,
                   sep: str) -> KernelChanges:
    """Per-step time and per-call time changes of one matched kernel row."""
    gb, gn = group_series(wb, base_names, sep), group_series(wn, new_names, sep)
    if gb is None or gn is None:
        why = "its per-step series is not in report.json (not among the kernels with the most time in steps)"
        return {"time": row("time", "kernel", "time per step", "ns", None, why),
                "per_call": row("per_call", "kernel", "time per call", "ns", None, why)}
    return {"time": row("time", "kernel", "time per step", "ns", shift(gb[0], gn[0])),
            "per_call": row("per_call", "kernel", "time per call", "ns",
                            shift(per_call(*gb), per_call(*gn)),
                            "it ran in fewer than 2 steps on a side")}


class InStepSummary(TypedDict):
    level: float
    method: str
    base_steps: int
    new_steps: int
    base_series_steps: int
    new_series_steps: int
    base_outside_ns: int
    new_outside_ns: int
    base_outside_kernels: int
    new_outside_kernels: int


def summary(wb: Work, wn: Work) -> InStepSummary:
    return {
        "level": LEVEL,
        "method": "Hodges-Lehmann shift with its distribution-free interval (log scale: ratio new/base)",
        "base_steps": wb.steps, "new_steps": wn.steps,
        "base_series_steps": wb.series_steps, "new_series_steps": wn.series_steps,
        "base_outside_ns": wb.outside_ns, "new_outside_ns": wn.outside_ns,
        "base_outside_kernels": wb.outside_kernels, "new_outside_kernels": wn.outside_kernels,
    }


COUNT_KEYS = ("step_count", "steps", "count", "n_steps")
P50_KEYS = ("p50_ns", "latency_p50_ns", "step_p50_ns")
P90_KEYS = ("p90_ns", "latency_p90_ns", "step_p90_ns")
P25_KEYS = ("p25_ns", "latency_p25_ns")
P75_KEYS = ("p75_ns", "latency_p75_ns")
DURATION_KEYS = ("duration_ns", "dur_ns", "latency_ns")


@frozen
class PhaseSteps:
    phase: str
    count: int
    p50_ns: float
    p90_ns: float
    iqr_ns: float | None  # None: no per-step distribution in the report


def _first(row: StepsPhaseDoc | StepDurationDoc, keys: tuple[str, ...]) -> float | None:
    for k in keys:
        v = row.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return v
    return None


def _phase_rows(m: StepsDoc) -> list[StepsPhaseDoc]:
    phases = m.get("phases")
    if isinstance(phases, dict):
        return [{"phase": str(k), **v} for k, v in phases.items() if isinstance(v, dict)]
    if isinstance(phases, list):
        return [r for r in phases if isinstance(r, dict)]
    return []


def _durations(m: StepsDoc) -> dict[str, np.ndarray]:
    steps = m.get("steps")
    if not isinstance(steps, list):
        return {}
    by_phase: dict[str, list[float]] = {}
    for s in steps:
        if isinstance(s, dict) and (d := _first(s, DURATION_KEYS)) is not None:
            by_phase.setdefault(str(s.get("phase") or "all"), []).append(float(d))
    return {p: np.asarray(v) for p, v in by_phase.items()}


def read_steps(side: Side) -> dict[str, PhaseSteps] | str:
    """Phase -> step figures, or the reason there are none."""
    m = side.metric("steps")
    if m is None:
        return side.why_missing("steps")
    durations = _durations(m)
    out: dict[str, PhaseSteps] = {}
    for row in _phase_rows(m):
        phase = str(row.get("phase") or row.get("name") or "all")
        count, p50, p90 = _first(row, COUNT_KEYS), _first(row, P50_KEYS), _first(row, P90_KEYS)
        if not count or p50 is None or p90 is None:
            continue
        p25, p75 = _first(row, P25_KEYS), _first(row, P75_KEYS)
        iqr: float | None = None
        if phase in durations and len(durations[phase]) >= 2:
            q25, q75 = np.percentile(durations[phase], [25, 75])
            iqr = float(q75 - q25)
        elif p25 is not None and p75 is not None:
            iqr = float(p75 - p25)
        out[phase] = PhaseSteps(phase, int(count), float(p50), float(p90), iqr)
    return out or f"{side.role}: metrics.steps lists no phase with a step count and p50/p90 latency"


def total_steps(found: dict[str, PhaseSteps] | str) -> int | None:
    return sum(p.count for p in found.values()) if isinstance(found, dict) else None


class SpreadNoise(TypedDict):
    """A phase's median change against the baseline's interquartile range (older reports)."""

    status: Literal["ok", "not_assessed"]
    base_iqr_ns: float | None
    median_change_ns: float
    exceeds_spread: NotRequired[bool]
    verdict: str


class IntervalNoise(TypedDict):
    """A phase's Hodges-Lehmann change of step time and its interval, as the noise check."""

    status: Literal["ok", "not_assessed"]
    method: NotRequired[str]
    verdict: str
    n_base: NotRequired[int | None]
    n_new: NotRequired[int | None]
    base_median: NotRequired[float | None]
    new_median: NotRequired[float | None]
    change_pct: NotRequired[float | None]
    low_pct: NotRequired[float | None]
    high_pct: NotRequired[float | None]
    beyond_noise: NotRequired[bool]


def _noise(b: PhaseSteps, n: PhaseSteps) -> SpreadNoise:
    change = n.p50_ns - b.p50_ns
    if b.iqr_ns is None:
        return {
            "status": "not_assessed",
            "base_iqr_ns": None,
            "median_change_ns": change,
            "verdict": "not assessed, because the baseline report has no per-step distribution",
        }
    if abs(change) <= b.iqr_ns:
        verdict = "within the baseline spread"
    else:
        verdict = ("slower" if change > 0 else "faster") + " beyond the baseline spread"
    return {
        "status": "ok",
        "base_iqr_ns": b.iqr_ns,
        "median_change_ns": change,
        "exceeds_spread": abs(change) > b.iqr_ns,
        "verdict": verdict,
    }


def _interval(lb: np.ndarray, ln: np.ndarray) -> IntervalNoise:
    """The phase's Hodges-Lehmann change of step time, as the noise check."""
    s = shift(lb, ln)
    if s is None:
        return {"status": "not_assessed", "verdict": "not assessed, because a side has fewer than 2 steps"}
    r = row("step_time", "step", "step time", "ns", s)
    if r["low_pct"] is None:
        verdict = f"no 95% interval with {s.n_base} vs {s.n_new} steps"
    elif s.beyond_noise:
        verdict = ("slower" if s.estimate > 0 else "faster") + " beyond the noise"
    else:
        verdict = "within the noise"
    return {"status": "ok", "method": "hodges_lehmann", "verdict": verdict,
            "n_base": r["n_base"], "n_new": r["n_new"], "base_median": r["base_median"],
            "new_median": r["new_median"], "change_pct": r["change_pct"], "low_pct": r["low_pct"],
            "high_pct": r["high_pct"], "beyond_noise": r["beyond_noise"]}


class PhaseRow(TypedDict):
    """diff.json `steps.phases`: one phase's step latency on both sides."""

    phase: str
    base_count: int
    new_count: int
    base_p50_ns: float
    new_p50_ns: float
    p50_delta_pct: float | None
    base_p90_ns: float
    new_p90_ns: float
    p90_delta_pct: float | None
    noise: IntervalNoise | SpreadNoise


class StepsSection(TypedDict):
    """diff.json `steps`."""

    status: Literal["ok", "not_compared"]
    reason: str | None
    phases: list[PhaseRow]
    unmatched_phases: NotRequired[list[str]]


def compare_steps(
    base: Side, new: Side, fb: dict[str, PhaseSteps] | str, fn: dict[str, PhaseSteps] | str,
    wb: Work | str | None = None, wn: Work | str | None = None,
) -> StepsSection:
    """diff.json `steps`: per phase present in both, p50/p90 change and the noise check."""
    if isinstance(fb, str) or isinstance(fn, str):
        return {"status": "not_compared", "reason": fb if isinstance(fb, str) else str(fn), "phases": []}
    lat_b = phase_latency(wb) if isinstance(wb, Work) else {}
    lat_n = phase_latency(wn) if isinstance(wn, Work) else {}
    rows: list[PhaseRow] = []
    for phase in [p for p in fb if p in fn]:
        b, n = fb[phase], fn[phase]
        both = phase in lat_b and phase in lat_n
        rows.append(
            {
                "phase": phase,
                "base_count": b.count,
                "new_count": n.count,
                "base_p50_ns": b.p50_ns,
                "new_p50_ns": n.p50_ns,
                "p50_delta_pct": json_pct(rel_pct(b.p50_ns, n.p50_ns)),
                "base_p90_ns": b.p90_ns,
                "new_p90_ns": n.p90_ns,
                "p90_delta_pct": json_pct(rel_pct(b.p90_ns, n.p90_ns)),
                "noise": _interval(lat_b[phase], lat_n[phase]) if both else _noise(b, n),
            }
        )
    only = sorted(set(fb) ^ set(fn))
    if not rows:
        return {
            "status": "not_compared",
            "phases": [],
            "reason": "no phase has steps in both reports "
            f"(phases only on one side: {', '.join(only)})",
        }
    return {"status": "ok", "reason": None, "phases": rows, "unmatched_phases": only}
