"""host_sources.family_of: the one-search shortcut gives the family the ordered patterns give."""

from __future__ import annotations

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
