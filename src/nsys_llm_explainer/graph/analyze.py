"""Build, replay, follow the critical path, and replay each what-if: the whole analysis of
one trace, as plain results the critical_path and what_if metrics turn into report data.

Predicted step times are measured times minus the replayed gain (the unmodified replay
minus the changed one, step by step), so the replay's own error on a step does not count
as a gain. The whole captured window's prediction subtracts the gains of every step: the
replayed steps' own, and for steps left out of a sample their phase's mean gain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.graph import changes as ch
from nsys_llm_explainer.graph.build import Graph, build
from nsys_llm_explainer.graph.path import Path, critical_paths
from nsys_llm_explainer.graph.replay import Params, Times, replay
from nsys_llm_explainer.graph.steps import SPAN, Anchors, Plan, StepTimes, anchors, plan, step_times


@dataclass(frozen=True)
class ChangeResult:
    change: str
    touched: int  # nodes the change modified
    predicted: np.ndarray  # per replayed step
    gain: np.ndarray  # per replayed step (>= 0 not enforced: a change may cost)
    window_gain: int


@dataclass
class Analysis:
    plan: Plan
    graph: Graph
    params: Params
    times: Times
    anchors: Anchors
    measured: np.ndarray  # per replayed step
    replayed: np.ndarray
    base: StepTimes  # the unmodified replay's step times
    observed: StepTimes  # the same measured
    path: Path
    followed: np.ndarray  # the blocks whose critical path was followed
    measured_window: int
    changes: list[ChangeResult] = field(default_factory=list)

    @property
    def error_pct(self) -> np.ndarray:
        return 100.0 * np.abs(self.replayed - self.measured) / np.maximum(self.measured, 1)


def analyze(
    data: Any,
    steps: pd.DataFrame | None,
    labels: ch.TaskLabels | Callable[[Graph], ch.TaskLabels],
    what_ifs: Sequence[ch.Change] = (),
    capture: list[tuple[int, int, int]] | None = None,
    nodes_per_step: float = 1.0,
    window: int | None = None,
) -> Analysis:
    pl = plan(steps, nodes_per_step, capture or [])
    g = build(data, pl.blocks)
    p = Params.of(g)
    t = replay(g, p)
    an = anchors(g, pl)
    observed = step_times(g, pl, an, p, None)
    base = step_times(g, pl, an, p, t)
    measured = observed.step.astype(np.int64)
    replayed = base.step.astype(np.int64)
    followed = path_blocks(measured)
    path = critical_paths(g, p, t, an.chain, base.start, base.end, base.last_task, pl.anchor == SPAN, followed)
    win = window if window is not None else int(pl.blocks.end.max() - pl.blocks.start.min()) if len(pl.blocks) else 0
    result = Analysis(pl, g, p, t, an, measured, replayed, base, observed, path, followed, win)
    task_labels = labels(g) if callable(labels) else labels
    all_changes = [ch.Change(k) for k in ch.BUILTIN] + list(what_ifs)
    lanes = StreamLanes.of(g, pl)
    for change in all_changes:
        cp, tail, touched = ch.apply(change, g, p, task_labels)
        if touched == 0:
            pred = replayed.copy()
        else:
            ct = replay(g, cp)
            pred = step_times(g, pl, an, cp, ct, tail).step.astype(np.int64)
        gain = replayed - pred
        window_gain = min(_window_gain(pl, gain), max(win - lanes.floor(cp), 0))
        result.changes.append(ChangeResult(change.key, touched, np.maximum(measured - gain, 0), gain,
                                           window_gain))
    return result


@dataclass(frozen=True)
class StreamLanes:
    """Each task of the graph once (a task carried into a step is also in the step before it),
    with the stream it runs on (process, device, stream), built once for every change."""

    task: np.ndarray  # index into the graph's tasks
    lane: np.ndarray  # lane code per kept task
    lanes: int

    @staticmethod
    def of(g: Graph, pl: Plan) -> StreamLanes:
        pid = np.asarray(pl.blocks.pid)[g.d_block]
        frame = pd.DataFrame({"pid": pid, "kind": g.d_kind, "row": g.d_row, "device": g.d_device,
                              "stream": g.d_stream})
        task = np.flatnonzero(~frame.duplicated(["pid", "kind", "row"]).to_numpy())
        lane, uniques = pd.MultiIndex.from_frame(frame.iloc[task][["pid", "device", "stream"]]).factorize()
        return StreamLanes(task, lane.astype(np.int64), len(uniques))

    def floor(self, p: Params) -> int:
        """The least the window can take after a change: a stream runs its work one task at a
        time, so no window is shorter than the busiest stream's work at the durations the change
        leaves. Steps end where their own work ends, so a step may be shorter than the work
        queued into it; the window, which holds that work, may not."""
        if not self.lanes:
            return 0
        work = np.zeros(self.lanes, np.int64)
        np.add.at(work, self.lane, p.d_dur[self.task].astype(np.int64))
        return int(work.max())


MAX_PATH_STEPS = 48


def median_block(measured: np.ndarray) -> int:
    """The block of the median step (the lower middle one for an even count)."""
    return int(np.argsort(measured, kind="stable")[(len(measured) - 1) // 2]) if len(measured) else -1


def path_blocks(measured: np.ndarray) -> np.ndarray:
    """The steps whose critical path is followed: all of them up to MAX_PATH_STEPS, else
    that many evenly spaced ones and the median step."""
    n = len(measured)
    if n <= MAX_PATH_STEPS:
        return np.arange(n)
    picked = np.linspace(0, n - 1, MAX_PATH_STEPS).round().astype(np.int64)
    return np.unique(np.r_[picked, median_block(measured)])


def _window_gain(pl: Plan, gain: np.ndarray) -> int:
    """The gain over the whole capture. Processes run side by side, so the window shrinks
    by the largest of their gains; a process's gain is the sum over its steps, the steps a
    sample left out counted at the mean of its replayed ones."""
    if len(gain) == 0:
        return 0
    best = 0.0
    for pid in np.unique(pl.blocks.pid).tolist():
        mine = gain[pl.blocks.pid == pid]
        total = float(mine.mean()) * pl.pid_steps.get(int(pid), len(mine))
        best = max(best, total)
    return int(round(best))
