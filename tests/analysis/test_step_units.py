"""Steps versus layers: the helpers of analysis/steps.py on hand-made sequences."""

from __future__ import annotations

import numpy as np

from nsys_llm_explainer.analysis.steps import LAUNCH_BASIS, Units, boundary, nested, periodic_groups


def _units(tokens: list[int], times: list[int], graph: list[bool] | None = None) -> Units:
    n = len(tokens)
    g = np.array(graph if graph is not None else [False] * n)
    return Units(np.array(tokens), np.array(times), np.arange(n), np.arange(n), np.arange(n), g,
                 LAUNCH_BASIS)


def _decode(steps: int, layers: int, pause: int) -> tuple[list[int], list[int]]:
    """Tokens and launch times: per step 9 (embedding), `layers` x [1, 2, 3], 8 (head), then
    a host pause of `pause` ns; launches 5 us apart otherwise."""
    tokens, times, t = [], [], 0
    for _ in range(steps):
        for tok in [9] + [1, 2, 3] * layers + [8]:
            tokens.append(tok)
            times.append(t)
            t += 5_000
        t += pause
    return tokens, times


def test_nested_counts_layers_per_step() -> None:
    tokens, _ = _decode(5, 12, 0)
    step = 2 + 3 * 12
    bounds = np.arange(0, 5 * step + 1, step)
    assert nested(np.array(tokens), bounds) == (3, 12)


def test_nested_is_none_without_repeats_inside() -> None:
    tokens = np.array([1, 2, 3, 4, 5, 6] * 4)
    assert nested(tokens, np.arange(0, 25, 6)) is None


def test_boundary_host_pause_marks_steps_not_layers() -> None:
    tokens, times = _decode(5, 12, 300_000)
    u = _units(tokens, times)
    step = 2 + 3 * 12
    steps = np.arange(0, 5 * step, step)
    layers = np.arange(1, 5 * step - 1, 3)
    assert "pauses" in boundary(u, steps, step, np.empty(0, np.int64))
    assert boundary(u, layers, 3, np.empty(0, np.int64)) is None


def test_boundary_synchronize_only_between_repeats() -> None:
    tokens, times = _decode(5, 4, 0)
    u = _units(tokens, times)
    step = 2 + 3 * 4
    bounds = np.arange(0, 5 * step, step)
    between = np.array([times[b] - 1_000 for b in bounds[1:]])  # a sync returns just before each step
    assert "synchronize" in boundary(u, bounds, step, between)
    everywhere = np.array(times[1:]) - 1_000  # a sync after every launch marks nothing
    assert boundary(u, bounds, step, everywhere) is None


def test_boundary_graph_replays() -> None:
    u = _units([-1, 5] * 6, list(range(0, 12_000, 1_000)), [True, False] * 6)
    assert boundary(u, np.arange(0, 12, 2), 2, np.empty(0, np.int64)) == "each repeat is a CUDA graph replay"


def test_periodic_groups() -> None:
    assert periodic_groups([(1, 2)] * 6) == 1
    assert periodic_groups([(1,), (2,), (3,)] * 4) == 3
    assert periodic_groups([(i,) for i in range(10)]) is None
