"""Reading Nsight Compute CSV exports: every shared real export, and the synthetic raw page,
against a deliberately simple reader of the same files; layouts, units, damaged input."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.ncu.classify import BUSY_PCT, classify
from nsys_llm_explainer.ncu.counters import figures, join
from nsys_llm_explainer.ncu.csvfile import number, read_file, scale
from nsys_llm_explainer.ncu.results import assess, load

ROOT = Path(__file__).resolve().parents[2]
SHARED_NCU = ROOT.parent / "shared" / "ncu"
RAW_FIXTURE = ROOT / "tests" / "fixtures" / "ncu" / "raw_page_prof_crlf.csv"
TIME = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "second": 1e9}
BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}


def shared_files() -> list[Path]:
    if not SHARED_NCU.is_dir():
        pytest.skip(f"shared Nsight Compute exports not found at {SHARED_NCU} (a clone outside /work)")
    return sorted(SHARED_NCU.glob("*.csv"))


# ---------------------------------------------------------------- a deliberately simple reader

def simple_read(path: Path) -> dict[tuple[str, str, str], dict[str, tuple[str, str]]]:
    """(ID, pid, kernel) -> {metric name (or Section/name): (unit, value)}: the quoted lines
    from the header on, either layout."""
    text = path.read_bytes().decode("utf-8-sig")
    lines = text.replace("\r\n", "\n").split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    rows = list(csv.reader(line for line in lines[start:] if line.startswith('"')))
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    out: dict[tuple[str, str, str], dict[str, tuple[str, str]]] = {}
    units = None
    for r in rows[1:]:
        r = r + [""] * (len(header) - len(r))
        if not r[0]:
            units = r
            continue
        got = out.setdefault((r[col["ID"]], r[col["Process ID"]], r[col["Kernel Name"]]), {})
        if "Metric Name" in col:
            if r[col["Metric Name"]]:
                cell = (r[col["Metric Unit"]], r[col["Metric Value"]])
                got[r[col["Section Name"]] + "/" + r[col["Metric Name"]]] = cell
                got.setdefault(r[col["Metric Name"]], cell)
        else:
            for i, name in enumerate(header[11:], 11):
                got[name] = (units[i] if units else "", r[i])
    return out


def num(text: str) -> float | None:
    t = text.replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None


def expected_duration(m: dict[str, tuple[str, str]]) -> float | None:
    if "gpu__time_duration.sum" in m:
        unit, value = m["gpu__time_duration.sum"]
        return num(value) * TIME[unit]  # type: ignore[operator]
    if "sm__cycles_elapsed.avg" in m:
        return num(m["sm__cycles_elapsed.avg"][1]) / num(m["sm__cycles_elapsed.avg.per_second"][1]) * 1e9  # type: ignore[operator]
    return None


def expected_bytes(m: dict[str, tuple[str, str]]) -> float | None:
    if "dram__bytes.sum" in m:
        return num(m["dram__bytes.sum"][1]) * BYTES[m["dram__bytes.sum"][0]]  # type: ignore[operator]
    parts = [m.get("dram__bytes_read.sum"), m.get("dram__bytes_write.sum")]
    if any(p is None or num(p[1]) is None for p in parts):
        return None
    return sum(num(v) * BYTES[u] for u, v in parts)  # type: ignore[misc, operator]


def expected_class(m: dict[str, tuple[str, str]]) -> str | None:
    sm = m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed")
    mem = m.get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") or m.get(
        "GPU Speed Of Light Throughput/Memory Throughput")
    if sm is None or mem is None:
        return None
    s, g = num(sm[1]), num(mem[1])
    assert s is not None and g is not None
    return {(True, True): "balanced", (True, False): "compute-bound", (False, True): "memory-bound",
            (False, False): "latency-bound"}[(s >= BUSY_PCT, g >= BUSY_PCT)]


def check_file(path: Path) -> None:
    want = simple_read(path)
    launches = assess(load([path])).launches
    assert len(launches) == len(want)
    for m in launches:
        key = (str(m.launch.id), str(m.launch.pid), m.launch.kernel)
        ref = want[key]
        d, b = expected_duration(ref), expected_bytes(ref)
        assert (m.figures.duration_ns is None) == (d is None), key
        if d is not None:
            assert m.figures.duration_ns == pytest.approx(d, rel=1e-9)
        assert (m.figures.dram_bytes is None) == (b is None), key
        if b is not None:
            assert m.figures.dram_bytes == pytest.approx(b, rel=1e-9)
        assert m.verdict.kind == expected_class(ref), key


def test_every_shared_export_matches_a_simple_reading() -> None:
    files = shared_files()
    assert len(files) == 4
    for path in files:
        check_file(path)


def test_shared_exports_together_join_the_section_export_to_its_launch() -> None:
    files = shared_files()
    results = assess(load([SHARED_NCU]))
    assert sum(len(simple_read(p)) for p in files) == len(results.launches) + 1  # roofline CSV joins flash
    flash = [m for m in results.launches if "flash_fwd_splitkv" in m.launch.kernel]
    assert len(flash) == 1 and len(flash[0].launch.files) == 2
    f = flash[0].figures
    # its own peaks: 2 x 21,760 FFMA per cycle x 2.13 GHz; 128 bytes per cycle x 13.77 GHz
    assert f.peaks is not None and f.peaks.flops["fp32"] == pytest.approx(43_520 * 2.13e9)
    assert f.peaks.dram_bandwidth == pytest.approx(128 * 13.77e9)
    assert f.tensor_ops == {"bf16->fp32": 335_544_320.0}
    gemm = next(m for m in results.launches if "Kernel2<cutlass_80" in m.launch.kernel)
    assert (gemm.figures.duration_ns, gemm.figures.dram_bytes) == (111_810.0, 17_500_000.0)
    assert gemm.verdict.kind == "latency-bound" and gemm.verdict.pct_of_roof == 32.1
    assert gemm.verdict.causes[0].startswith("occupancy 17% from the registers per thread and the shared memory")
    old = [m for m in results.launches if m.launch.layouts == ("details (Kernel Time layout)",)]
    assert len(old) == 10 and all(m.figures.sources["duration"].startswith("sm__cycles_elapsed") for m in old)


def test_raw_page_fixture_with_prof_lines_crlf_and_separators() -> None:
    raw = RAW_FIXTURE.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf==PROF==") and b"\r\n" in raw and b'"1,234.50"' in raw
    check_file(RAW_FIXTURE)
    read = read_file(RAW_FIXTURE)
    assert read.preamble_lines == 7 and read.skipped_lines == 2 and read.tables[0].layout == "raw"
    res = assess(load([RAW_FIXTURE]))
    norm, gemm, flash = res.launches
    assert norm.figures.dram_bytes == 1_234.5e6 + 617_250e3 and norm.figures.duration_ns == 1_050_250.0
    assert norm.verdict.limiter == "DRAM at 86% of peak"
    assert gemm.verdict.kind == "compute-bound"
    assert gemm.point is not None and gemm.point.precision == "bf16" and gemm.point.tensor
    assert gemm.point.peak_flops == 989.5e12 and gemm.gpu == "NVIDIA H100 80GB HBM3"  # named by the export
    assert flash.figures.dram_bytes is None and "dram_bytes" in flash.figures.missing  # write is n/a
    assert flash.verdict.causes == (
        "occupancy 6% from 255 registers per thread, 1 block per SM",
        "warps stall most on long scoreboard (12.5 cycles per issued instruction)",
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [("12,532,580,352", 12_532_580_352.0), ("161,177.21", 161_177.21), ("4.0e-05", 4e-5), ("n/a", None),
     ("", None), ("(256, 1, 1)", None), ("1,2", None), ("-3", -3.0), ("1e400", None)],
)
def test_numbers(text: str, value: float | None) -> None:
    assert number(text) == value


@pytest.mark.parametrize(
    ("unit", "factor", "canonical"),
    [("usecond", 1e-6, "second"), ("us", 1e-6, "second"), ("msecond", 1e-3, "second"), ("Mbyte", 1e6, "byte"),
     ("Kibyte", 1024.0, "byte"), ("Gbyte/s", 1e9, "byte/second"), ("cycle/usecond", 1e6, "cycle/second"),
     ("Ghz", 1e9, "cycle/second"), ("register/thread", 1.0, "register/thread"), ("%", 1.0, "%"),
     ("furlong", 1.0, "furlong")],
)
def test_units(unit: str, factor: float, canonical: str) -> None:
    got = scale(unit)
    assert got[1] == canonical and got[0] == pytest.approx(factor)


HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name",'
          '"Metric Unit","Metric Value"')


def _row(i: int, name: str, metric: str, unit: str, value: str, section: str = "Command line profiler metrics") -> str:
    return f'"{i}","7","p","h","{name}","1","7","{section}","{metric}","{unit}","{value}"'


def test_layout_quirks(tmp_path: Path) -> None:
    """Program output with quotes after the header, a cell spanning lines, a short row, a
    second concatenated export, gzip."""
    text = "\n".join([
        "hello from the app", HEADER,
        _row(0, "k", "gpu__time_duration.sum", "usecond", "2.50"),
        'app says "hi',
        '"0","7","p","h","k","1","7","SpeedOfLight","","","","SOLBottleneck"',
        _row(0, "k", "Duration", "usecond", "2.50", "GPU Speed Of Light Throughput"),
        HEADER,
        _row(0, "k", "gpu__time_duration.sum", "nsecond", "9,000"),
        '"1","7","p","h","k2","1","7","Occupancy","Achieved Occupancy","%","50"',
    ])
    path = tmp_path / "two.csv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    read = read_file(path)
    assert [len(t.records) for t in read.tables] == [1, 2] and read.preamble_lines == 1
    assert read.skipped_lines == 1  # the app's line with a stray quote
    launches = join(list(read.tables))
    assert [figures(x).duration_ns for x in launches] == [2_500.0, 9_000.0, None]  # two tables: two launches


def test_section_exports_join_unless_they_contradict(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    a.write_text(HEADER + "\n" + _row(0, "k", "gpu__time_duration.sum", "usecond", "2.50") + "\n")
    b.write_text(HEADER + "\n" + _row(0, "k", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "70") + "\n")
    c.write_text(HEADER + "\n" + _row(0, "k", "gpu__time_duration.sum", "nsecond", "9000") + "\n")
    joined = load([a, b]).launches
    assert len(joined) == 1 and joined[0].files == (str(a), str(b))
    assert len(load([a, c]).launches) == 2  # same ID, pid and name, another duration: another run
    assert len(load([a, tmp_path / "a.csv"]).launches) == 1  # one file named twice is read once


def test_classes_at_the_thresholds() -> None:
    def verdict(sm: str, mem: str) -> str | None:
        path_values = {("", "", "sm__throughput.avg.pct_of_peak_sustained_elapsed"): sm,
                       ("", "", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"): mem}
        from nsys_llm_explainer.ncu.counters import Launch
        from nsys_llm_explainer.ncu.csvfile import Value

        launch = Launch(0, None, "k", {}, {k: Value(v, "%") for k, v in path_values.items()}, (), ("x",), ("raw",))
        return classify(figures(launch)).kind

    assert verdict("60", "59.99") == "compute-bound"
    assert verdict("59.99", "60") == "memory-bound"
    assert verdict("60", "60") == "balanced"
    assert verdict("59.99", "59.99") == "latency-bound"
    assert verdict("n/a", "80") is None


def test_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    rep = tmp_path / "run 1.ncu-rep"
    rep.write_bytes(b"\x00\x01NVIDIA binary")
    with pytest.raises(InputError) as err:
        load([rep])
    assert "ncu --import '" + str(rep) + "' --csv --page details > 'run 1.csv'" in err.value.message
    other = tmp_path / "table.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="not an Nsight Compute CSV export"):
        load([other])
    with pytest.raises(InputError, match="no such file"):
        load([tmp_path / "missing.csv"])
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.ncu-rep").write_bytes(b"\x00")
    with pytest.raises(InputError, match="ncu --import"):
        load([empty])
    nothing = tmp_path / "nothing.csv"
    nothing.write_text("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")
    with pytest.raises(InputError, match="profiled no kernel"):
        load([nothing])


def test_a_folder_skips_what_is_not_an_export_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "kernels.csv").write_text("name,calls\nk,1\n")
    (tmp_path / "run.csv").write_bytes(RAW_FIXTURE.read_bytes())
    (tmp_path / "lone.ncu-rep").write_bytes(b"\x00")
    loaded = load([tmp_path])
    assert len(loaded.launches) == 3
    assert any("kernels.csv" in n and "skipped" in n for n in loaded.notes)
    assert any("lone.ncu-rep" in n and "ncu --import" in n for n in loaded.notes)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet='",\r\n\ufeff0123456789.,%/ a-zn=PROF', max_size=60), max_size=10))
@example(lines=['"', '"0"\r"""'])  # balanced quotes the csv module rejects
def test_any_lines_after_a_header_read_or_fail_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                          lines: list[str]) -> None:
    path = tmp_path_factory.mktemp("ncu") / "x.csv"
    path.write_text("\n".join([HEADER, _row(0, "k", "gpu__time_duration.sum", "usecond", "1"), *lines]))
    try:
        results = assess(load([path]))
    except InputError as exc:
        assert "\n" not in exc.message
    else:
        assert results.launches and all(m.figures is not None for m in results.launches)


def test_ncu_md_says_when_files_share_a_launch(tmp_path: Path) -> None:
    """The shared files hold 13 launch records (counted by a simple reading) for 12 launches:
    the file table's counts add up to more than the launches, and ncu.md says why."""
    from nsys_llm_explainer.cli import run

    files = shared_files()
    records = sum(len(simple_read(p)) for p in files)
    assert run(["ncu", str(SHARED_NCU), "--out", str(tmp_path / "o")]) == 0
    md = (tmp_path / "o" / "ncu.md").read_text()
    assert (f"The files hold {records} launch records for {records - 1} launches: records of one launch (the same "
            "process and launch ID) in several files") in md
    assert run(["ncu", str(files[0]), "--out", str(tmp_path / "one")]) == 0
    assert "launch records for" not in (tmp_path / "one" / "ncu.md").read_text()
