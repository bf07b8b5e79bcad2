"""Kernel name normalization and --fail-on parsing."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.diff import gate
from nsys_llm_explainer.diff.kernels import normalize, strip_templates
from nsys_llm_explainer.errors import UsageError


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("void gemm<128, 64, (int)2>(float *, int)", "void gemm(float*,int)"),
        ("void f<A<B<1>>, 2>(int)", "void f(int)"),
        ("triton_poi_fused_add_3", "triton_poi_fused_add_#"),
        ("triton_poi_fused_add_17", "triton_poi_fused_add_#"),
        ("sm90_xmma_gemm_bf16bf16_128x64", "sm90_xmma_gemm_bf16bf16_128x64"),
        ("  void   k(float*)  ", "void k(float*)"),
        ("bool operator<(A, B)", "bool operator<(A,B)"),
        ("void ns::Foo<int>::operator()<float>(int)", "void ns::Foo::operator()(int)"),
        ("void run<[lambda() (instance 2)]>(int)", "void run(int)"),
        ("x<unbalanced(int)", "x<unbalanced(int)"),
    ],
)
def test_normalize(name, expected):
    assert normalize(name) == expected


def test_renamed_template_instances_share_a_key_and_different_kernels_do_not():
    a = normalize("void gemm_kernel<128, 64, 2>(float const*, float*)")
    b = normalize("void gemm_kernel<256, 64, 3>(float const*, float*)")
    assert a == b == "void gemm_kernel(float const*,float*)"
    assert normalize("void gemv_kernel<128>(float const*, float*)") != a


def test_strip_templates_keeps_arrow_operator():
    assert strip_templates("T* Ptr<T>::operator->()") == "T* Ptr::operator->()"


def test_parse_forms():
    conds = gate.parse(
        ["step_p50_pct>5, kernel_time_pct >= 3", "new_high_findings>0", "launches_pct<-10%"]
    )
    assert [(c.metric, c.op, c.threshold) for c in conds] == [
        ("step_p50_pct", ">", 5.0),
        ("kernel_time_pct", ">=", 3.0),
        ("new_high_findings", ">", 0.0),
        ("launches_pct", "<", -10.0),
    ]
    assert gate.parse(None) == ()


@pytest.mark.parametrize(
    "expr", ["step_p50_pct", "bogus>1", "kernel_time_pct=>3", "kernel_time_pct>abc", "> 3"]
)
def test_bad_expressions_name_the_valid_metrics(expr):
    with pytest.raises(UsageError) as err:
        gate.parse([expr])
    msg = err.value.message
    assert (
        "\n" not in msg
        and "step_p50_pct" in msg
        and "new_high_findings" in msg
        and "> >= < <= ==" in msg
    )


def test_evaluate_statuses():
    conds = gate.parse(["kernel_time_pct>3,sync_time_pct>5,step_p50_pct>5,new_findings==0"])
    values = {
        "kernel_time_pct": (3.0, None),
        "sync_time_pct": (float("inf"), None),
        "step_p50_pct": (None, "no steps"),
        "new_findings": (0.0, None),
    }
    out = gate.evaluate(conds, values)
    assert [c["status"] for c in out["conditions"]] == [
        "passed",
        "tripped",
        "not_evaluated",
        "tripped",
    ]
    assert out["conditions"][1]["value"] == "inf"
    assert out["conditions"][2]["reason"] == "no steps"
    assert out["tripped"] is True


def test_docs_list_every_gate_metric_with_its_meaning():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "diff.md").read_text(encoding="utf-8")
    for metric, meaning in gate.GATE_METRICS.items():
        assert f"| `{metric}` | {meaning} |" in doc
