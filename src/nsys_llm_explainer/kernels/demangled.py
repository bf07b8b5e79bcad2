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

What a kernel name is judged by: its function name, not its template arguments or
parameters (kernels/demangled.py parses the name).

`subjects(name)` gives, in the order they are tried:
1. for a generic launcher (below), the functor or lambda it runs;
2. the function's own name (for `f(...)::[lambda]::operator()`, `f`);
3. the enclosing namespaces and classes (`deep_ep::intranode` of `deep_ep::intranode::dispatch`),
   only consulted when neither of the above says anything.

Generic launchers are kernels whose function name says nothing about the work: PyTorch's
TensorIterator launchers (`vectorized_elementwise_kernel<4, FillFunctor<float>, ...>`,
`reduce_kernel<512, 1, ReduceOp<float, MeanOps<...>>>`, ...), CUTLASS's
`cutlass::Kernel<Op>` / `Kernel2<Op>` / `device_kernel<Op>` and composable kernel's
`ck_tile::kentry<256, 1, FmhaFwdKernel<...>>`. Their functor is the first
template argument that names a function, functor or lambda: values (`4`, `(int)4`) and
plain types (`float`, `c10::Half`, `std::array<...>`, offset calculators) are skipped, and
wrappers that only forward another functor (`gpu_kernel_impl_nocast<F>`,
`BinaryFunctor<float, float, float, MulFunctor<float>>`, `ReduceOp<float, MeanOps<...>>`,
`func_wrapper_t<...>`, `enable_sm90_or_later<F>`) are looked through. A lambda stands for
the function that defines it (`direct_copy_kernel_cuda(...)::[lambda]...` is
`direct_copy_kernel_cuda`). The functor is given with its namespaces, template arguments
left out (`vllm::cutlass_3x_gemm_fp8::GemmKernel`).

One kernel's name as another tool prints it: Nsight Compute against a trace.

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
   that differ are two kernels (two instances of one template), never a match."""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from functools import lru_cache

from nsys_llm_explainer.frozen import frozen

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


@frozen
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


@frozen
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


GENERIC_LAUNCHERS = re.compile(
    r"^(elementwise_kernel|vectorized_elementwise_kernel|unrolled_elementwise_kernel|"
    r"vectorized_templated_elementwise_kernel|index_elementwise_kernel|"
    r"elementwise_kernel_with_index|distribution_elementwise_grid_stride_kernel|"
    r"distribution_nullary_kernel|reduce_kernel|multi_tensor_apply_kernel|"
    r"_scatter_gather_elementwise_kernel|gpu_kernel_with_index)$"
)
CUTLASS_LAUNCHERS = re.compile(r"^(Kernel|Kernel2|device_kernel)$")
WRAPPERS = re.compile(
    r"^(gpu_kernel_impl|gpu_kernel_impl_nocast|gpu_kernel|gpu_index_kernel|launch_kernel|"
    r"BinaryFunctor|AUnaryFunctor|BUnaryFunctor|ReduceOp|func_wrapper_t|"
    r"enable_sm\w*|launch_vectorized_kernel|launch_legacy_kernel)$"
)
# Template arguments that are data types or helpers, never the work itself.
PLAIN_TYPES = re.compile(
    r"^(void|bool|char|wchar_t|short|int|long|float|double|unsigned|signed|size_t|"
    r"u?int\d+_t|__half|__half2|half|__nv_bfloat16|__nv_bfloat162|__nv_fp8\w*|Half|BFloat16|"
    r"complex|Float8_\w+|float\d*_t|bfloat16_t|half_t|tfloat32_t|float_e\w+|array|Array|"
    r"T\d+|OpaqueType|TrivialOffsetCalculator|OffsetCalculator|LoadWithCast|StoreWithCast|"
    r"LoadWithoutCast|StoreWithoutCast|TensorListMetadata|FusedOptimizerTensorListMetadata|"
    r"TensorInfo|GenericPackedTensorAccessor|PackedTensorAccessor\d*|RestrictPtrTraits|"
    r"DefaultPtrTraits|CUDAGeneratorImpl|decltype)$"
)
_VALUE = re.compile(r"^(\(|-?\d|true\b|false\b|nullptr\b)")
_DECORATION = re.compile(r"^((const|volatile|struct|class|typename|enum)\s+)+|\s+(const|volatile)$")


def _functor(arg: str, depth: int = 0) -> str | None:
    """The qualified name of the work inside one template argument, or None."""
    text = _DECORATION.sub("", arg.strip().lstrip("&*").strip()).rstrip("*& ")
    if not text or _VALUE.match(text) or depth > 8:
        return None
    p = parse(text)
    base = p.base
    if base is None or PLAIN_TYPES.match(base.name):
        return None
    if WRAPPERS.match(base.name):
        for inner in base.template_args:
            found = _functor(inner, depth + 1)
            if found:
                return found
        return None
    names = [c.name for c in p.components[: p.components.index(base) + 1] if not c.is_anonymous]
    return "::".join(names)


def is_generic(p: ParsedName) -> bool:
    if GENERIC_LAUNCHERS.match(p.function):
        return True
    if p.function == "kentry" and "ck_tile" in p.scope:  # composable kernel's launcher: kentry<256, 1, Kernel>
        return True
    return bool(CUTLASS_LAUNCHERS.match(p.function)) and "cutlass" in p.scope


def functor(p: ParsedName) -> str | None:
    """For a generic launcher, the functor it runs (see the module doc), else None."""
    if not is_generic(p):
        return None
    for arg in p.template_args:
        found = _functor(arg)
        if found:
            return found
    return None


@lru_cache(maxsize=65536)
def subjects(name: str) -> tuple[str, ...]:
    """The texts a kernel name is classified by, in the order they are tried."""
    p = parse(name)
    out: list[str] = []
    f = functor(p)
    if f:
        out.append(f)
    out.append(p.base_name)
    scope = "::".join(
        c.name for c in p.components[:-1] if not (c.is_anonymous or c.is_lambda)
    )
    if scope:
        out.append(scope)
    return tuple(out)


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


@frozen
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
