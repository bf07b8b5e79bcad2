"""A small parser for demangled C++ names as profilers show them, so that a kernel is
judged by its own function name and not by text inside its template arguments or
parameter list.

    void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
        std::array<char *, 2>>(int, T2, T3)

parses to the components at / native / vectorized_elementwise_kernel, the last one with
template arguments ("4", "at::native::FillFunctor<float>", "std::array<char *, 2>") and
parameters "int, T2, T3"; the return type "void" is set apart.

Both spellings that appear in traces are understood: Nsight Systems' (`<unnamed>`,
`[lambda() (instance 1)]`, `(int)4`) and c++filt's, used by the PyTorch profiler
(`(anonymous namespace)`, `{lambda()#1}`, `> >`). Operator names (`operator()`,
`operator<<`, `operator new`) are names, not brackets. Text that is not a C++ name at all
(`sm80_xmma_gemm_...`, `nvjet_...`, a mangled `_Z...` name) parses to one component holding
the whole text. The parser never fails: unbalanced brackets are closed at the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Spellings with brackets or spaces that are one name, replaced by placeholders before the
# bracket scan and put back after. Longer operators first so "<<=" is not read as "<".
_OPERATOR = re.compile(
    r"\boperator\s*(\(\s*\)|\[\s*\]|->\*?|<<=?|>>=?|<=>|[-+*/%^&|~!=<>]=?|&&|\|\||\+\+|--|,|"
    r"new\s*\[\s*\]|delete\s*\[\s*\]|new\b|delete\b|\"\"\s*\w+)"
)
_FIXED = ("(anonymous namespace)", "<unnamed>")
_PLACEHOLDER = "\ue000{}\ue001"
_PLACEHOLDER_RX = re.compile("\ue000(\\d+)\ue001")
_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
# cv/ref/noexcept qualifiers after a parameter list ("operator()() const").
_QUALIFIERS = re.compile(r"\)(?:\s*(?:const\b|volatile\b|noexcept\b|&&|&(?!&)))+")
_LAMBDA = re.compile(r"^(\[lambda\b|\{lambda\b|\{unnamed type\b|\[with\b)")
ANONYMOUS = frozenset(_FIXED)


@dataclass(frozen=True)
class Component:
    """One `::`-separated part of a qualified name."""

    name: str  # identifier, operator name, lambda, or anonymous-namespace marker
    template_args: tuple[str, ...] = ()
    params: str | None = None  # parameter list text of a function component, else None

    @property
    def is_lambda(self) -> bool:
        return bool(_LAMBDA.match(self.name))

    @property
    def is_anonymous(self) -> bool:
        return self.name in ANONYMOUS

    @property
    def is_call_operator(self) -> bool:
        return self.name.replace(" ", "") == "operator()"


@dataclass(frozen=True)
class ParsedName:
    components: tuple[Component, ...]
    return_type: str = ""

    @property
    def function(self) -> str:
        """The entity's own name: the last component's name (no template arguments)."""
        return self.components[-1].name if self.components else ""

    @property
    def template_args(self) -> tuple[str, ...]:
        return self.components[-1].template_args if self.components else ()

    @property
    def params(self) -> str | None:
        return self.components[-1].params if self.components else None

    @property
    def scope(self) -> tuple[str, ...]:
        """Names of the enclosing namespaces, classes and functions, outermost first."""
        return tuple(c.name for c in self.components[:-1])

    @property
    def base(self) -> Component | None:
        """The innermost component with a real name: lambdas and a lambda's operator()
        are skipped (for `f(...)::[lambda]::operator()` this is `f`)."""
        for c in reversed(self.components):
            if not (c.is_lambda or c.is_call_operator or c.is_anonymous):
                return c
        return None

    @property
    def base_name(self) -> str:
        base = self.base
        return base.name if base is not None else self.function

    def qualified(self, upto: Component | None = None) -> str:
        """The `::`-joined component names (template arguments left out), up to `upto`."""
        names = []
        for c in self.components:
            names.append(c.name)
            if c is upto:
                break
        return "::".join(names)


def _protect(text: str) -> tuple[str, list[str]]:
    saved: list[str] = []

    def keep(token: str) -> str:
        saved.append(token)
        return _PLACEHOLDER.format(len(saved) - 1)

    for fixed in _FIXED:
        if fixed in text:
            text = text.replace(fixed, keep(fixed))
    def op(m: re.Match[str]) -> str:
        symbol = re.sub(r"\s+", "", m.group(1))
        return keep("operator" + (" " if symbol[:1].isalpha() else "") + symbol)

    text = _OPERATOR.sub(op, text)
    return text, saved


def _restore(text: str, saved: list[str]) -> str:
    if not saved or "\ue000" not in text:
        return text.strip()
    return _PLACEHOLDER_RX.sub(lambda m: saved[int(m.group(1))], text).strip()


_BRACKETS = re.compile(r"[<(\[{>)\]}]")
_SPLITTERS = {sep: re.compile(r"[<(\[{>)\]}]|" + re.escape(sep)) for sep in (" ", "::", ",")}


def _top_level(text: str) -> list[tuple[int, int, str]]:
    """(start, end, opening bracket) of each outermost bracket group; end is the index of
    the closing bracket (len(text) when it never closes)."""
    groups: list[tuple[int, int, str]] = []
    stack: list[str] = []
    start = 0
    for m in _BRACKETS.finditer(text):  # only bracket characters are visited
        ch = m.group()
        if ch in _OPEN:
            if not stack:
                start = m.start()
            stack.append(ch)
        elif stack and stack[-1] == _CLOSE[ch]:
            stack.pop()
            if not stack:
                groups.append((start, m.start(), text[start]))
    if stack:
        groups.append((start, len(text), text[start]))
    return groups


def _split_top(text: str, sep: str) -> list[str]:
    """`text` split at `sep` (" ", "::" or ",") where it is outside every bracket group."""
    parts: list[str] = []
    depth = 0
    last = 0
    for m in _SPLITTERS[sep].finditer(text):
        ch = m.group()
        if ch == sep:
            if depth == 0:
                parts.append(text[last : m.start()])
                last = m.end()
        elif ch in _OPEN:
            depth += 1
        elif depth:
            depth -= 1
    parts.append(text[last:])
    return parts


def _component(text: str, saved: list[str]) -> Component:
    text = text.strip()
    if text[:1] in ("[", "{", "("):  # a lambda or an unnamed entity is its own name
        return Component(_restore(text, saved))
    groups = _top_level(text)
    name_end = groups[0][0] if groups else len(text)
    targs: tuple[str, ...] = ()
    params = None
    for start, end, kind in groups:
        inner = text[start + 1 : end]
        if kind == "<" and not targs and params is None:
            targs = tuple(_restore(a, saved) for a in _split_top(inner, ",") if a.strip())
        elif kind == "(" and params is None:
            params = _restore(inner, saved)
    return Component(_restore(text[:name_end], saved) or _restore(text, saved), targs, params)


@lru_cache(maxsize=65536)
def parse(text: str) -> ParsedName:
    """The components and return type of a demangled name (see the module doc)."""
    s, saved = _protect(text.strip())
    s = _QUALIFIERS.sub(")", s)
    chunks = [c for c in _split_top(s, " ") if c]
    if not chunks:
        return ParsedName((Component(text.strip()),))
    # The name is the last chunk that carries a parameter list (what follows it is not part
    # of the name), else the last chunk; chunks before it are the return type.
    with_params = [i for i, c in enumerate(chunks) if any(k == "(" for _, _, k in _top_level(c))]
    at = with_params[-1] if with_params else len(chunks) - 1
    name = chunks[at]
    lead = len(name) - len(name.lstrip("*&"))  # "void *ns::f()": the '*' is the return type's
    name = name[lead:]
    returns = " ".join(chunks[:at]) + chunks[at][:lead]
    parts = [p for p in _split_top(name, "::") if p.strip()]
    components = tuple(_component(p, saved) for p in parts) or (Component(_restore(name, saved)),)
    return ParsedName(components, _restore(returns, saved))
