"""host_patterns.syncs_after_launches (thread by thread) against the one-sort reference it
replaced: all calls sorted by (thread, start), a blocking call counted when the call before
it on its thread is a launch."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.metrics import host_patterns as hp


def reference(tkey, start, blocking, launching):
    rows = np.flatnonzero(blocking | launching)
    rows = rows[np.lexsort((start[rows], tkey[rows]))]
    prev_launch = np.r_[False, launching[rows[:-1]] & (tkey[rows[1:]] == tkey[rows[:-1]])]
    after = blocking[rows] & prev_launch
    threads = []
    for t in np.unique(tkey[rows]).tolist():
        mine = tkey[rows] == t
        launches = int(launching[rows[mine]].sum())
        n = int(after[mine].sum())
        if n >= hp.SYNC_PER_LAUNCH_MIN_CALLS and launches and n >= hp.SYNC_PER_LAUNCH_SHARE * launches:
            threads.append((t, n, launches))
    keys = np.array([t for t, _, _ in threads])
    return threads, rows[after & np.isin(tkey[rows], keys)]


threads = st.integers(0, 3) | st.integers(0, 500)  # few threads, or more than one mask pass each
calls = st.lists(st.tuples(threads, st.integers(0, 40), st.sampled_from(["launch", "sync", "other"])), max_size=300)


@settings(max_examples=200, deadline=None)
@given(calls, st.integers(1, 12))
def test_the_same_threads_and_calls_as_one_sort(rows, min_calls):
    tkey = np.array([t for t, _, _ in rows], np.int64)
    start = np.array([s for _, s, _ in rows], np.int64)
    launching = np.array([k == "launch" for _, _, k in rows], bool)
    blocking = np.array([k == "sync" for _, _, k in rows], bool)
    old = hp.SYNC_PER_LAUNCH_MIN_CALLS
    hp.SYNC_PER_LAUNCH_MIN_CALLS = min_calls
    try:
        got_threads, got_rows = hp.syncs_after_launches(tkey, start, blocking, launching)
        want_threads, want_rows = reference(tkey, start, blocking, launching)
    finally:
        hp.SYNC_PER_LAUNCH_MIN_CALLS = old
    assert got_threads == want_threads
    assert got_rows.tolist() == want_rows.tolist()


def test_a_launch_sync_loop_by_hand():
    # thread 5: launch, sync x 12 (each after a launch); thread 9: syncs only
    kinds = ["launch", "sync"] * 12
    tkey = np.array([5] * 24 + [9] * 3, np.int64)
    start = np.array(list(range(24)) + [0, 1, 2], np.int64)
    launching = np.array([k == "launch" for k in kinds] + [False] * 3)
    blocking = np.array([k == "sync" for k in kinds] + [True] * 3)
    threads, rows = hp.syncs_after_launches(tkey, start, blocking, launching)
    assert threads == [(5, 12, 12)]
    assert rows.tolist() == list(range(1, 24, 2))
