"""host_sources.family_of: the one-search shortcut gives the family the ordered patterns give."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis.host_sources import FAMILIES, FAMILY_NAMES, family_of

PIECES = [
    "DataLoader", "_next_data", "optimizer.step", "AdamW", "adam", "sgd_", "zero_grad", "aten::item",
    ".cpu(", "cudaStreamSynchronize", "cudaMemcpy", "cudaMemcpy_v3020", "cuMemcpyDtoH_v2",
    "(blocking copy)", "cudaMalloc", "hipFree", "caching_allocator", "ncclAllReduce", "nccl:all_reduce",
    "c10d::broadcast_", "MPI_Wait", "all_gather", "read", "pread64", "write", "poll", "futex",
    "pthread_mutex_lock", "sem_timedwait", "scheduler", "detokenize", "sampler", "execute_model",
    "checkpoint", "wandb", "aten::linear", "## forward ##", "backward", "Torch-Compiled Region",
    "nn.Module: Linear", "x", "_", " ", "\n", "ADAM", "lamb2", "tolist", "Memcpy", "sample",
]


def reference(name: str) -> int:
    for i, (_, pattern) in enumerate(FAMILIES):
        if pattern.search(name):
            return i
    return -1


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=4))
def test_family_of_equals_the_ordered_patterns(parts: list[str]) -> None:
    name = "".join(parts)
    assert family_of(name) == reference(name)


def test_known_names() -> None:
    want = {"DataLoader.__next__": "data_loading", "cudaStreamSynchronize": "sync",
            "cudaMemcpy (blocking copy)": "sync", "ncclAllReduce": "communication", "futex": "waiting",
            "aten::linear": "framework", "something_else": None}
    for name, family in want.items():
        got = family_of(name)
        assert (FAMILY_NAMES[got] if got >= 0 else None) == family, name


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-1, 5), st.integers(0, 50)), max_size=80))
def test_heaviest_value_per_group_matches_a_dict_reference(rows: list[tuple[int, int, int]]) -> None:
    """Per group: the value whose rows hold the most time, the smallest value on a tie."""
    from nsys_llm_explainer.analysis.host_sources import _heaviest

    groups = sorted({g for g, _, _ in rows})
    codes = np.array([groups.index(g) for g, _, _ in rows], dtype=np.int64)
    values = np.array([v for _, v, _ in rows], dtype=np.int64)
    ns = np.array([n for _, _, n in rows], dtype=np.int64)
    sums: dict[int, dict[int, int]] = {}
    for g, v, n in rows:
        sums.setdefault(groups.index(g), {}).setdefault(v, 0)
        sums[groups.index(g)][v] += n
    expected = [min(by, key=lambda v: (-by[v], v)) for _, by in sorted(sums.items())]
    assert _heaviest(codes, values, ns, len(groups)).tolist() == expected
