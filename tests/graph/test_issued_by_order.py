"""graph.tasks.issued_by_order: when work without a recorded launch call was issued, from
its correlation id, against a by-hand reference; and a trace whose calls carry no
correlation id at all (every work item before the capture's first call)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from nsys_llm_explainer.graph.tasks import BEFORE_CAPTURE, issued_by_order


class Data:
    def __init__(self, pid, corr, start):
        self.rt = SimpleNamespace(pid=np.array(pid, np.int64), corr=np.array(corr, np.int64),
                                  start=np.array(start, np.int64))

    def runtime(self):
        return self.rt

    def cached(self, key, build):
        return build()


def test_the_call_with_the_next_lower_id_of_the_same_process():
    data = Data(pid=[7, 7, 7, 9], corr=[10, 20, 30, 15], start=[100, 200, 300, 150])
    got = issued_by_order(data, np.array([7, 7, 7, 9, 9, 8]), np.array([25, 10, 5, 99, 3, 40]))
    # by hand: the last call of the same process with a strictly lower id. 25 -> call 20
    # (200); 10 -> none (call 10 is not lower); 5 -> none; pid 9: 99 -> call 15 (150), 3 ->
    # none; pid 8 has no call.
    assert got.tolist() == [200, BEFORE_CAPTURE, BEFORE_CAPTURE, 150, BEFORE_CAPTURE, BEFORE_CAPTURE]


def test_calls_without_correlation_ids_put_all_work_before_the_capture():
    data = Data(pid=[7, 7], corr=[0, 0], start=[100, 200])
    got = issued_by_order(data, np.array([7, 7]), np.array([1, 5]))
    assert got.tolist() == [BEFORE_CAPTURE, BEFORE_CAPTURE]
    empty = Data(pid=[], corr=[], start=[])
    assert issued_by_order(empty, np.array([3]), np.array([4])).tolist() == [BEFORE_CAPTURE]
