"""One kernel's name as another tool prints it: Nsight Compute against a trace.

ncu prints a kernel demangled (its default), mangled (`--print-kernel-base mangled`) or by
its function name only (`--print-kernel-base function`); a trace holds the demangled name
(Nsight Systems, the PyTorch profiler) and, in Nsight Systems exports, the mangled one.
A name is matched in this order, and the first step that finds exactly one trace kernel
wins:

1. mangled: equal mangled names;
2. demangled: equal names, or equal after `canonical` (one spelling for both demanglers:
   NVIDIA's `<unnamed>`, `(int)4`, `[lambda() (instance 1)]` and c++filt's
   `(anonymous namespace)`, `4`, `{lambda()#1}`; blanks only where two words meet);
3. short: equal function names (the identifier before the template arguments and the
   parameter list; for a mangled name, the last name in it), where one side names the
   function only (ncu's `--print-kernel-base function`, `--kernel-name short` on the
   trace) or ncu's mangled name meets a trace without mangled names, and only one trace
   kernel has that function name. Many kernels share one (`Kernel2`,
   `elementwise_kernel`): such a name is ambiguous and is not matched. Two full names
   that differ are two kernels (two instances of one template), never a match.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from nsys_llm_explainer.kernels.demangled import parse

_LAMBDA_NV = re.compile(r"\[lambda\(([^()]*)\) \(instance (\d+)\)\]")
_CAST = re.compile(r"\((?:unsigned |signed )?(?:bool|char|short|int|long|long long|__int128)\)(-?\d+)")
_SUFFIX = re.compile(r"(?<![\w.])(-?\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_BOOL = {"true": "1", "false": "0"}
_BOOL_RX = re.compile(r"\b(true|false)\b")
_PUNCT = re.compile(r"\s*([^\w\s])\s*")
_WS = re.compile(r"\s+")
_MANGLED_ID = re.compile(r"(\d+)")


def canonical(name: str) -> str:
    """A demangled name in one spelling, whichever demangler wrote it."""
    s = _WS.sub(" ", name).strip()
    s = s.replace("(anonymous namespace)", "<unnamed>")
    s = _LAMBDA_NV.sub(lambda m: "{lambda(" + m.group(1) + ")#" + m.group(2) + "}", s)
    s = _CAST.sub(r"\1", s)
    s = _SUFFIX.sub(r"\1", s)
    s = _BOOL_RX.sub(lambda m: _BOOL[m.group(1)], s)
    return _PUNCT.sub(r"\1", s)


def is_mangled(name: str) -> bool:
    return name.startswith("_Z")


def mangled_function(name: str) -> str | None:
    """The last source name in an Itanium-mangled name (`_ZN2at6native6kernelILi4EEEvv` ->
    `kernel`), or None when it does not start like one."""
    if not name.startswith("_Z"):
        return None
    i = 2
    nested = name.startswith("_ZN")
    if nested:
        i = 3
        while i < len(name) and name[i] in "rVKRO":  # cv and ref qualifiers
            i += 1
    last = None
    while i < len(name):
        if name.startswith("St", i):
            i += 2
            continue
        if name.startswith("S", i) and nested:  # a substitution (S_, S0_): skip it
            end = name.find("_", i)
            if end < 0:
                break
            i = end + 1
            continue
        m = _MANGLED_ID.match(name, i)
        if m is None:
            break
        length = int(m.group(1))
        start = m.end()
        if length <= 0 or start + length > len(name):
            break
        last = name[start:start + length]
        i = start + length
        if not nested:
            break
        if name.startswith("I", i):  # template arguments end the search for a nested name's last part
            depth = 0
            while i < len(name):
                if name[i] == "I":
                    depth += 1
                elif name[i] == "E":
                    depth -= 1
                    if depth == 0:
                        i += 1
                        break
                i += 1
        if i < len(name) and name[i] == "E":
            break
    return last


def is_bare(name: str) -> bool:
    """A function name alone (no template arguments, no parameter list, not mangled)."""
    return not is_mangled(name) and "(" not in name and "<" not in name


def function_name(name: str) -> str:
    """The function's identifier, however the name is written."""
    if is_mangled(name):
        return mangled_function(name) or name
    return parse(name).base_name


@dataclass(frozen=True)
class Match:
    key: Hashable | None  # the trace kernel's key, None when unmatched
    how: str | None  # "mangled", "demangled", "short"
    reason: str | None  # why unmatched


class Matcher:
    """Trace kernels by each form of their name; `match(name)` finds the one an ncu name is."""

    def __init__(self, kernels: Iterable[tuple[Hashable, str, str | None]]) -> None:
        """`kernels`: (key, name as the trace shows it, mangled name or None)."""
        self.mangled: dict[str, set[Hashable]] = {}
        self.exact: dict[str, set[Hashable]] = {}
        self.canon: dict[str, set[Hashable]] = {}
        # function name -> (key, the trace shows only the function name, the trace has a mangled name)
        self.short: dict[str, set[tuple[Hashable, bool, bool]]] = {}
        for key, name, mangled in kernels:
            if mangled:
                self.mangled.setdefault(mangled, set()).add(key)
            if is_mangled(name):
                self.mangled.setdefault(name, set()).add(key)
            else:
                self.exact.setdefault(name, set()).add(key)
                self.canon.setdefault(canonical(name), set()).add(key)
            entry = (key, is_bare(name), bool(mangled) or is_mangled(name))
            for form in {function_name(name), *([function_name(mangled)] if mangled else [])}:
                self.short.setdefault(form, set()).add(entry)

    def match(self, name: str) -> Match:
        """The trace kernel `name` is. A full name that matches no full name is matched by its
        function name only where the trace cannot tell more: the trace shows function names
        only, or `name` is mangled and the trace kept no mangled names."""
        if is_mangled(name):
            found = self.mangled.get(name, set())
            if len(found) == 1:
                return Match(next(iter(found)), "mangled", None)
        else:
            for table, form in ((self.exact, name), (self.canon, canonical(name))):
                found = table.get(form, set())
                if len(found) == 1:
                    return Match(next(iter(found)), "demangled", None)
        short = function_name(name)
        bare, mangled = is_bare(name), is_mangled(name)
        keys = {key for key, t_bare, t_mangled in self.short.get(short, set())
                if bare or t_bare or (mangled and not t_mangled)}
        if len(keys) == 1:
            return Match(next(iter(keys)), "short", None)
        if len(keys) > 1:
            return Match(None, None, f"ambiguous: {len(keys)} kernels of the trace are named {short}")
        return Match(None, None, "no kernel of the trace has this name")


__all__ = ["Match", "Matcher", "canonical", "function_name", "is_bare", "mangled_function"]
