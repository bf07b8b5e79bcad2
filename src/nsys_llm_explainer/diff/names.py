"""Kernel name normalization, so one kernel matches across builds.

Builds of the same model often differ only in template arguments (tile sizes, launch
bounds, functor instance numbers) or in compiler-assigned numeric suffixes
(`triton_poi_fused_add_3` vs `_7`). The normalized form:

1. removes every template argument list `<...>`, nested ones included (`operator<` and
   `operator->` are left alone);
2. replaces each standalone number (digits not touching a letter or digit, such as the
   `3` in `_3` or `(instance 2)`) with `#`;
3. drops whitespace except between two identifier characters.

Example: `void gemm<128, 64, (int)2>(float *, int)` -> `void gemm(float*,int)`.
"""

from __future__ import annotations

import re

_OPERATORS = re.compile(r"operator\s*(<<=|>>=|<<|>>|<=|>=|->\*?|<|>)")
_NUMBER = re.compile(r"(?<![A-Za-z0-9])\d+(?![A-Za-z0-9])")
_SPACE_AROUND_PUNCT = re.compile(r"\s*([^\w\s])\s*")
_SPACES = re.compile(r"\s+")


def strip_templates(name: str) -> str:
    """Remove `<...>` lists; return the input unchanged if its brackets do not balance."""
    protected = _OPERATORS.sub(lambda m: "operator" + "\x00" * len(m.group(1)), name)
    out: list[str] = []
    depth = 0
    for i, ch in enumerate(protected):
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(name[i] if ch == "\x00" else ch)
    return name if depth else "".join(out)


def normalize(name: str) -> str:
    s = _SPACES.sub(" ", name).strip()
    s = strip_templates(s)
    s = _NUMBER.sub("#", s)
    return _SPACE_AROUND_PUNCT.sub(r"\1", s).strip()
