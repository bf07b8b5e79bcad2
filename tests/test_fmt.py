"""Numbers as text: one rounding path for percentages, one unit choice for durations."""

from __future__ import annotations

import random

import pytest

from nsys_llm_explainer import fmt
from nsys_llm_explainer.model import round_pct


@pytest.mark.parametrize(("raw", "stored"), [
    (75.6488, 75.64),  # round(raw, 2) = 75.65 would read 75.7%
    (23.6501, 23.66),  # round(raw, 2) = 23.65 is the float 23.6499..., read 23.6%
    (12.3456, 12.35),
    (0.25, 0.25),
    (99.995, 100.0),
    (0.0, 0.0),
])
def test_stored_percentages_read_as_the_unrounded_value(raw: float, stored: float) -> None:
    assert round_pct(raw) == stored
    assert f"{round_pct(raw):.1f}" == f"{raw:.1f}"


def test_stored_percentages_stay_within_a_hundredth() -> None:
    rnd = random.Random(7)
    for _ in range(20_000):
        raw = rnd.uniform(0, 100)
        assert f"{round_pct(raw):.1f}" == f"{raw:.1f}"
        assert abs(round_pct(raw) - raw) <= 0.01 + 1e-9


@pytest.mark.parametrize(("ns", "us_text", "ms_text", "dur_text"), [
    (851, "0.9 µs", "0.001 ms", "851 ns"),
    (9_999_900, "9,999.9 µs", "10.000 ms", "10.0 ms"),
    (10_000_000, "10.000 ms", "10.000 ms", "10.0 ms"),  # 10,000 µs: the next unit up, full precision
    (421_287_300, "421.287 ms", "421.287 ms", "421 ms"),
    (9_773_600_000, "9.774 s", "9,773.600 ms", "9.77 s"),
    (10_000_000_000, "10.000 s", "10.000 s", "10.0 s"),  # 10,000 ms: seconds
    (999_960, "999.96 µs".replace("999.96", "1,000.0"), "1.000 ms", "1.00 ms"),  # rounds up a unit
    (1_234_500_000_000, "1,234.500 s", "1,234.500 s", "1,234 s"),  # integer digits kept
    (None, "n/a", "n/a", "n/a"),
])
def test_one_unit_choice_for_durations(ns, us_text, ms_text, dur_text) -> None:
    from nsys_llm_explainer import fmt

    assert (fmt.us(ns), fmt.ms(ns), fmt.dur(ns)) == (us_text, ms_text, dur_text)


@pytest.mark.parametrize(("value", "text"), [
    (27.698, "27.7"), (0.0123456, "0.0123"), (9.9996, "10.0"), (99.96, "100"), (1234.5, "1,234"),
    (0, "0"), (-4.745, "-4.75"), (None, "n/a"),
])
def test_three_significant_digits(value, text) -> None:
    from nsys_llm_explainer import fmt

    assert fmt.sig(value) == text


@pytest.mark.parametrize(("nbytes", "text"), [
    (512, "512 B"), (1023, "1,023 B"), (1024, "1.00 KiB"), (225_120_000, "215 MiB"), (51_002_736_640, "47.5 GiB"),
])
def test_sizes_read_with_three_significant_digits(nbytes, text) -> None:
    from nsys_llm_explainer import fmt

    assert fmt.size(nbytes) == text


@pytest.mark.parametrize(("value", "text"), [
    (4.3, "4.3%"), (95.0, "95.0%"), (99.94, "99.9%"), (99.96, "100%"), (100.0, "100%"), (151.59, "152%"),
    (0.04, "0.0%"), (None, "n/a"),
])
def test_shares_keep_three_significant_digits_at_most(value, text):
    assert fmt.pct(value) == text
