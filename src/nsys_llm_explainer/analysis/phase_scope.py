"""Phases and step instances from NVTX ranges (shared by boundness and steps).

Source, in order: `--step-range NAME` (ranges with exactly that name; each outermost one is a
step, its phase is the phase-map phase around it, else "step"), else the phase map (each
outermost range whose own name maps to a phase is one instance of that phase), else the
ranges the trace format itself marks as steps (PyTorch profiler ProfilerStep#N), as steps. A kernel
belongs to the instance that encloses its innermost NVTX range (nvtx_attribution's join:
the launch call lies inside the range on the launching thread).
"""

from __future__ import annotations

import numpy as np

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.join import KernelAttribution, kernel_attribution
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.data import Unavailable

STEP_PHASE = "step"


@frozen
class PhaseScope:
    source: str  # "step_range", "phase_map" or "profiler_step"
    phases: list[str]
    att: KernelAttribution
    instances: np.ndarray  # sorted range positions of the instances (steps / phase ranges)
    instance_phase: np.ndarray  # per instance: code into phases
    owner: np.ndarray  # per sorted range: position in `instances` of its enclosing instance, or -1

    def kernel_instance(self) -> np.ndarray:
        """Per kernel: position in `instances`, or -1."""
        pos = self.att.range_pos
        return np.where(pos >= 0, self.owner[np.maximum(pos, 0)], -1)

    def kernel_phase(self) -> np.ndarray:
        inst = self.kernel_instance()
        return np.where(inst >= 0, self.instance_phase[np.maximum(inst, 0)], -1)


def inherit(att: KernelAttribution, own: np.ndarray) -> np.ndarray:
    """Each sorted range's own label, else its nearest labelled ancestor's (-1: none)."""
    label = own.copy()
    for level in range(1, int(att.depth.max(initial=0)) + 1):
        idx = np.flatnonzero((att.depth == level) & (label < 0))
        label[idx] = label[att.index.parent[idx]]
    return label


def _owners(att: KernelAttribution, is_instance: np.ndarray) -> np.ndarray:
    n = len(is_instance)
    slot = np.full(n, -1, dtype=np.int64)
    slot[is_instance] = np.arange(int(is_instance.sum()))
    return inherit(att, slot)


def _map_labels(ctx: Context, range_name: np.ndarray) -> np.ndarray:
    pm = ctx.options.phase_map
    code = {p: i for i, p in enumerate(pm.phases())}
    by_name = np.array([code.get(pm.phase_of(n) or "", -1) for n in ctx.data.nvtx_names()] or [-1])
    return by_name[range_name] if len(range_name) else np.empty(0, np.int64)


def phase_scope(ctx: Context) -> PhaseScope | None:
    """The step/phase instances the options ask for, or None when no option names any."""
    step_names = {ctx.options.step_range} if ctx.options.step_range else set()
    pm = ctx.options.phase_map
    source = "step_range"
    try:
        if not step_names and not pm:
            step_names, source = set(ctx.data.step_marks()), "profiler_step"
            if not step_names:
                return None
        nv = ctx.data.nvtx()
    except Unavailable:
        return None
    att = kernel_attribution(ctx.data)
    range_name = nv.name[att.index.order]
    parent = att.index.parent
    map_own = _map_labels(ctx, range_name) if pm else np.full(len(range_name), -1, np.int64)
    map_label = inherit(att, map_own)
    if step_names:
        names = ctx.data.nvtx_names()
        wanted = [i for i, n in enumerate(names) if n in step_names]
        own = np.where(np.isin(range_name, wanted), 0, -1)
        labelled = inherit(att, own)
        has_parent = parent >= 0
        outer = (own == 0) & ~(has_parent & (labelled[np.maximum(parent, 0)] == 0))
        phases = [*pm.phases(), STEP_PHASE]
        inst = np.flatnonzero(outer)
        inst_phase = np.where(map_label[inst] >= 0, map_label[inst], len(phases) - 1)
        return PhaseScope(source, phases, att, inst, inst_phase, _owners(att, outer))
    has_parent = parent >= 0
    parent_label = np.where(has_parent, map_label[np.maximum(parent, 0)], -1)
    outer = (map_own >= 0) & (parent_label != map_own)
    inst = np.flatnonzero(outer)
    return PhaseScope("phase_map", pm.phases(), att, inst, map_own[inst], _owners(att, outer))


def instance_bounds(ctx: Context, scope: PhaseScope) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """start, end and pid of each instance."""
    nv = ctx.data.nvtx()
    rows = scope.att.index.order[scope.instances]
    return nv.start[rows], nv.end[rows], nv.pid[rows]
