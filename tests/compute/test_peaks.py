"""The per-dtype peak table, --gpu-peaks files and which peaks apply to a device."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from nsys_llm_explainer.compute import peaks
from nsys_llm_explainer.compute.arch import REPRESENTATIVE
from nsys_llm_explainer.compute.peaks import BY_NAME, lookup
from nsys_llm_explainer.errors import ExitCode, UsageError


def test_dense_figures_are_half_the_sparse_datasheet_figures():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    # H100 SXM datasheet prints sparse Tensor figures: TF32 989, BF16 1979, FP8 3958, INT8 3958.
    assert h100.tf32_tflops == 989 / 2  # 494.5
    assert h100.bf16_tflops == 1979 / 2  # 989.5
    assert h100.fp8_tflops == 3958 / 2  # 1979
    assert h100.int8_tops == 3958 / 2
    assert (h100.fp64_tflops, h100.fp64_tensor_tflops, h100.fp32_tflops) == (34, 67, 67)
    a100 = lookup("NVIDIA A100-SXM4-80GB")
    # A100 datasheet: TF32 156 | 312*, BF16 312 | 624*, INT8 624 | 1248*; HBM2e 2,039 GB/s.
    assert (a100.tf32_tflops, a100.bf16_tflops, a100.int8_tops, a100.hbm_gbps) == (
        156,
        312,
        624,
        2039,
    )
    assert a100.fp8_tflops is None
    l40s = lookup("NVIDIA L40S")
    assert (l40s.bf16_tflops, l40s.fp8_tflops) == (362.05, 1466 / 2)
    b200 = lookup("NVIDIA B200")
    # per-GPU sparse figures: FP8 9 PFLOPS, BF16 4.5 PFLOPS, TF32 2.2 PFLOPS.
    assert (b200.fp8_tflops, b200.bf16_tflops, b200.tf32_tflops) == (4500, 2250, 1100)
    mi300x = lookup("AMD Instinct MI300X")
    assert (mi300x.bf16_tflops, mi300x.fp8_tflops, mi300x.hbm_gbps) == (1307.4, 2614.9, 5300)


def test_every_gpu_the_brief_lists_is_present():
    for name in (
        "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB",
        "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL",
        "NVIDIA H200", "NVIDIA H20", "NVIDIA L4", "NVIDIA L40S", "NVIDIA A10", "NVIDIA A10G",
        "Tesla V100-SXM2-32GB", "Tesla T4", "NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4060",
        "NVIDIA TITAN RTX", "NVIDIA B200", "NVIDIA GB200", "AMD Instinct MI300X",
    ):  # fmt: skip
        spec = lookup(name)
        assert spec is not None and spec.source and spec.hbm_gbps > 0, name


def test_table_is_internally_consistent():
    for name, s in BY_NAME.items():
        p = s.peaks()
        assert all(v is None or v > 0 for v in p.values()), name
        ladder = [p[d] for d in ("fp32", "tf32", "bf16", "fp8") if p[d]]
        assert ladder == sorted(ladder), (name, ladder)  # lower precision is never slower
        if s.fp64_tensor_tflops and s.fp64_tflops:
            assert s.fp64_tensor_tflops >= s.fp64_tflops
        if s.int8_tops and s.bf16_tflops:
            assert s.int8_tops >= s.bf16_tflops
        assert s.arch in peaks.ARCH_FAMILIES, name
    for family, name in REPRESENTATIVE.items():
        assert lookup(name).arch == family


def test_peak_per_dtype_class():
    v100 = lookup("Tesla V100-SXM2-16GB")
    assert v100.peak_tflops("fp16") == 125 and v100.peak_tflops("bf16") is None
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert h100.peak_tflops("fp64") == 67  # the Tensor Core FP64 figure where there is one
    assert lookup("NVIDIA L4").peak_tflops("fp64") is None  # not published
    assert h100.peak_tflops("nonsense") is None
    assert peaks.ridge_points(h100)["bf16"] == pytest.approx(989.5e12 / 3350e9, abs=0.05)


def _write(tmp_path: Path, obj: object, name: str = "peaks.json") -> Path:
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return p


def test_user_file_overrides_and_adds(tmp_path):
    path = _write(
        tmp_path,
        {
            "gpus": [
                {"names": ["NVIDIA H100 80GB HBM3"], "bf16_tflops": 900, "hbm_gbps": 3000},
                {"names": ["Lab X1"], "arch": "hopper", "fp8_tflops": 1500, "hbm_gbps": 2500},
            ]
        },
    )
    table = peaks.load_gpu_peaks(path)
    h100 = lookup("NVIDIA H100 80GB HBM3", table.by_name)
    assert (h100.bf16_tflops, h100.hbm_gbps, h100.fp8_tflops) == (900, 3000, None)
    assert h100.source == "peaks.json" and h100.model == "NVIDIA H100 80GB HBM3"
    assert lookup("Lab X1", table.by_name).peak_tflops("fp8") == 1500
    assert lookup("NVIDIA A100-SXM4-80GB", table.by_name) is BY_NAME["NVIDIA A100-SXM4-80GB"]
    assert table.source == "built-in, with 2 names from peaks.json"
    r = peaks.resolve("Lab X1", table)
    assert r.basis == "user file" and r.spec.fp8_tflops == 1500
    assert peaks.load_gpu_peaks(None).by_name == BY_NAME


BAD_FILES = [
    ("not json {", "not valid JSON"),
    ([], 'expected a JSON object {"gpus": [...]}'),
    ({"gpus": []}, "1 to 500 entries"),
    ({"gpus": [], "extra": 1}, "unknown key(s) 'extra'"),
    ({"gpus": [{"names": ["A"]}]}, "hbm_gbps must be a positive number"),
    ({"gpus": [{"names": ["A"], "hbm_gbps": -1}]}, "hbm_gbps must be a positive number"),
    ({"gpus": [{"names": ["A"], "hbm_gbps": True}]}, "hbm_gbps must be a positive number"),
    ({"gpus": [{"names": ["A"], "hbm_gbps": 1, "bf16_tflops": "9"}]}, "bf16_tflops must be"),
    ('{"gpus": [{"names": ["A"], "hbm_gbps": NaN}]}', "hbm_gbps must be a positive number"),
    ({"gpus": [{"names": ["A"], "hbm_gbps": 1e9}]}, "no larger than"),
    ({"gpus": [{"names": [], "hbm_gbps": 1}]}, "names must be a non-empty list"),
    ({"gpus": [{"names": ["A"], "hbm_gbps": 1, "fp9": 1}]}, "unknown key(s) 'fp9'"),
    ({"gpus": [{"names": ["A"], "hbm_gbps": 1, "arch": "pascal"}]}, "arch must be one of"),
    ({"gpus": [{"names": ["A", "A"], "hbm_gbps": 1}]}, "device name 'A' appears twice"),
    ({"gpus": [{"names": ["A"], "hbm_gbps": 1, "x\ny": 1}]}, "unknown key(s) 'x\\ny'"),
    ({"gpus": ["H100"]}, "gpus[0] must be an object"),
]


@pytest.mark.parametrize(("content", "message"), BAD_FILES)
def test_bad_user_files_are_one_line_usage_errors(tmp_path, content, message):
    with pytest.raises(UsageError) as err:
        peaks.load_gpu_peaks(_write(tmp_path, content))
    assert message in err.value.message
    assert "\n" not in err.value.message and err.value.exit_code == ExitCode.USAGE


def test_unreadable_and_oversized_files(tmp_path):
    with pytest.raises(UsageError, match="cannot read GPU peak file"):
        peaks.load_gpu_peaks(tmp_path / "missing.json")
    big = _write(tmp_path, " " * (peaks.MAX_FILE_BYTES + 1))
    with pytest.raises(UsageError, match="larger than"):
        peaks.load_gpu_peaks(big)


SM90 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas"


def test_resolve_by_name_then_assumed_family_then_unknown(tmp_path):
    exact = peaks.resolve("NVIDIA H100 80GB HBM3", kernel_names=["volta_sgemm_128x64_nn"])
    assert exact.basis == "table" and exact.spec.model == "H100 SXM5 80GB" and not exact.assumed
    unknown = peaks.resolve("NVIDIA RTX A2000 12GB", kernel_names=[SM90])
    assert unknown.spec is None and unknown.basis == "unknown" and "--gpu-peaks" in unknown.note
    assumed = peaks.resolve(None, kernel_names=["elementwise_kernel", SM90])
    assert assumed.assumed and assumed.spec.model == "H100 SXM5 80GB"
    assert assumed.note.startswith("assumed:") and assumed.arch.evidence == (SM90,)
    nothing = peaks.resolve(None, kernel_names=["my_kernel"])
    assert nothing.spec is None and "no kernel name shows" in nothing.note
    star = peaks.load_gpu_peaks(
        _write(tmp_path, {"gpus": [{"names": ["*"], "bf16_tflops": 100, "hbm_gbps": 500}]})
    )
    fallback = peaks.resolve(None, star, kernel_names=[SM90])
    assert fallback.basis == "user file" and fallback.spec.bf16_tflops == 100
    assert peaks.resolve("NVIDIA L4", star).spec is BY_NAME["NVIDIA L4"]  # names win over '*'


def test_builtin_json_is_the_table(tmp_path):
    raw = json.loads(
        (Path(peaks.__file__).parents[1] / peaks.DATA_FILE).read_text(encoding="utf-8")
    )
    assert peaks.parse_table(raw, "x") == BY_NAME
    assert sum(len(e["names"]) for e in raw["gpus"]) == len(BY_NAME)
    assert all(math.isfinite(s.hbm_gbps) for s in BY_NAME.values())


def test_docs_peak_table_matches_the_data():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "compute.md").read_text(encoding="utf-8")
    table = doc[doc.index("| Model | CUDA device names |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = [line.split(" | ") for line in table]
    listed = set()

    def fmt(v: float | None) -> str:
        return "–" if v is None else f"{v:g}"

    for cells in rows:
        names = re.findall(r"`([^`]+)`", cells[1])
        spec = lookup(names[0])
        assert spec is not None and all(lookup(n) is spec for n in names), names
        expected = [spec.model, cells[1], spec.arch, f"{fmt(spec.fp64_tflops)} / {fmt(spec.fp64_tensor_tflops)}",
                    fmt(spec.fp32_tflops), fmt(spec.tf32_tflops), fmt(spec.bf16_tflops), fmt(spec.fp16_tflops),
                    fmt(spec.fp8_tflops), fmt(spec.int8_tops), fmt(spec.hbm_gbps)]  # fmt: skip
        assert [cells[0].lstrip("| ")] + cells[1:11] == expected, names
        listed.update(names)
    assert listed == set(BY_NAME)
