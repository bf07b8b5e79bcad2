"""Kineto microsecond timestamps -> integer nanoseconds, exactly.

Kineto writes `ts` and `dur` in microseconds, as integers or as decimals with up to three
fractional digits (nanoseconds). Epoch-based timestamps are about 1.7e15 us: a float64 has
no nanosecond left at that size (1700000000123456.789 reads back as ...456.75), so the
reader keeps each float's decimal text and this module converts the text exactly. The
unit is always microseconds; `displayTimeUnit` only tells viewers how to label the axis.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

_THOUSAND = Decimal(1000)
# Real times are at most about 20 characters (1700000000123456.789). Longer text, or a value
# of 10^25 us or more (far beyond the 2^62 ns the reader keeps), is not a time: refusing it
# here keeps the conversion cheap whatever the text holds.
MAX_TEXT = 64
MAX_EXPONENT = 24


class BadTime(ValueError):
    """A ts/dur that is not a finite JSON number."""


def us_to_ns(value: object) -> int:
    """Microseconds (int, or a float's decimal text) -> nanoseconds; sub-ns digits round
    half to even. BadTime for anything else."""
    if type(value) is int:
        return value * 1000
    if type(value) is str:
        if len(value) > MAX_TEXT:
            raise BadTime(f"{value[:30]!r}... is not a time (longer than {MAX_TEXT} characters)")
        # The common case, 123456.789: ASCII digits around the point. The value may be a
        # JSON string, not a number: anything else goes to _exact, which refuses it.
        if value.isascii():
            head, _, frac = value.partition(".")
            if 0 < len(frac) <= 3 and frac.isdigit() and (
                head.isdigit() or (head[:1] == "-" and head[1:].isdigit())
            ):
                return int(head + frac + "000"[len(frac) :])
        return _exact(value)
    if type(value) is float:  # only from callers that parsed floats themselves
        return _exact(repr(value))
    raise BadTime(f"{value!r} is not a number")


def _exact(text: str) -> int:
    if "_" in text or text != text.strip() or not text.isascii():  # Decimal reads these; no JSON number holds them
        raise BadTime(f"{text!r} is not a number")
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise BadTime(f"{text!r} is not a number") from None
    if not d.is_finite():
        raise BadTime(f"{text!r} is not finite")
    if d.adjusted() > MAX_EXPONENT:
        raise BadTime(f"{text!r} is out of range")
    return int((d * _THOUSAND).to_integral_value(rounding=ROUND_HALF_EVEN))
