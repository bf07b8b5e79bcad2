"""Where kernel names appear in a report, and the one set of labels every writer shows.

Labels come from analysis/kernel_labels over every kernel name of the report at once, so a
kernel reads the same in report.md, report.html, the plots and finding evidence, and two
different kernels never read the same. The CSV tables listed in KERNEL_TABLES get a `label`
column beside the full name, so a label with a ` #xxxx` suffix points to its row.

Short display labels for kernel names that stay distinct.

Demangled kernel names are long and differ in the middle: a head...tail cut turns a dozen
`at::native::vectorized_elementwise_kernel<4, SomeFunctor, ...>(int, T2, T3)` instances into
one string. kernel_labels(names) labels a whole set at once:

1. A name that parses as `[void] scope::function<args>(params)` is labelled by its function
   name and, when a template argument says what it computes (a functor, an op, a lambda:
   is_functor), that argument, alone or among its family, so a kernel reads the same in
   every report when it fits without a blind cut. When other names share the function name,
   the label adds the template arguments that tell them apart: the fewest positions that
   do, tried functors first, then other arguments (vector widths, types), then pointer
   arrays and offset calculators, then the parameter list, then the scope. Each is
   compacted: namespaces, casts, `void`, parameter lists and lambda noise dropped, so
   `at::native::BinaryFunctor<float, float, float, at::native::MulFunctor<float>>` reads
   `BinaryFunctor<float, float, float, MulFunctor<float>>`. Wrapper templates whose identity
   is their first argument (`cutlass::Kernel2<...>`) always show it. Arguments too long for
   the budget lose their spaces, then the scalar type arguments of nested templates
   (`BinaryFunctor<MulFunctor<float>>`) and `::lambda` before a lambda's parameters, then
   the last words of long identifiers (`direct_copy_kernel…`, never inside a word), then
   all but their innermost functor (`…sum_functor<float>(float,float)`); only then their
   middle is cut (the innermost functor, usually the difference, comes last and is kept).
2. Any other name (C names, Triton, cuBLAS `nvjet_*`, TensorRT tactics, mangled names) is
   kept whole when it fits, else cut head...tail. Long names of one family (same first
   `_`-separated token) are all shown by their first and last tokens around the tokens that
   not all of them share (`sm80…tilesize64x256x8_warpsize1x4x1…cublas`).
3. Labels longer than LABEL_MAX characters are cut head...tail ("…"). Names whose labels
   still coincide get a suffix ` #` + the first HASH_DIGITS hex digits of the SHA-1 of the
   full name (more digits when those coincide too); the `label` column of the kernel CSV
   tables shows it beside the full name.

The result depends only on the set of names (not their order): distinct names always get
distinct labels, and every label is at most LABEL_MAX characters long."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import MetricResult, Outcome

LABEL_MAX = 64  # characters; plots reserve room for this many in their label column
HASH_DIGITS = 4
MAX_HASH_DIGITS = 40  # all of SHA-1
SUFFIX_SEP = " #"
ELLIPSIS = "…"
# Templates whose first argument is what the kernel really is (CUTLASS wrappers).
WRAPPERS = frozenset({"Kernel", "Kernel2", "device_kernel", "kernel", "cutlass_kernel"})

_ANON = re.compile(r"\(anonymous namespace\)|<unnamed>")
_ANON_MARK = "{anon}"
_OPEN = {"<": ">", "(": ")", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_LAMBDA = re.compile(r"\[lambda(\([^\[\]]*?\))(?: \(instance \d+\))?\]|\{lambda(\([^{}]*?\))#\d+\}")
_CALL_OP = re.compile(r"::operator\s*\(\)\s*(?:<[^()]*>\s*)?\([^()]*\)(?:\s*const)?")
_LAMBDA_CHAIN = re.compile(r"(?:lambda\([^()]*\)::)+(lambda\([^()]*\))")
_CAST = re.compile(
    r"\((?:unsigned |signed )?(?:long long|long|int|short|char|bool|unsigned|size_t|u?int\d+_t)\)(-?\d+)"
)
_QUALIFIER = re.compile(r"(?:(?:\b[A-Za-z_]\w*|\{anon\})::)+(?!lambda\()(?=[A-Za-z_~{])")
_VOID = re.compile(r"\bvoid\s+")
_PTR = re.compile(r"\s+([*&])")
_SPACES = re.compile(r"\s+")
_OPERATOR = re.compile(r"\boperator\b")
_SCALARS = (
    "float|double|half|Half|BFloat16|bfloat16|__half|__nv_bfloat16|bool|char|short|int|long|long long|"
    "unsigned|unsigned int|unsigned long|unsigned char|int8_t|int32_t|int64_t|uint8_t|uint32_t|uint64_t"
)
_SCALAR_ARG = re.compile(rf"(?<=[<,])(?:{_SCALARS}),(?=.)")  # a scalar type argument before another
_SCALAR_TYPE = re.compile(rf"(?:{_SCALARS})")
_LAMBDA_IN_TEMPLATE = re.compile(r"^[A-Za-z_]\w*<(.+)>::lambda\([^()]*\)$")
_IDENT = re.compile(r"[A-Za-z_~][\w~]*$")
_LAMBDA_CALL = re.compile(r"::lambda(?=\()")
MIN_WORD = 4  # a shortened identifier keeps at least its first word of this many characters
_BOUNDARY = re.compile(r"(?<=[_:<>,()\s])(?=\w)|(?<=[a-z0-9])(?=[A-Z])|(?<=\w)(?=[_:<>,()])")
_IDENT_TOKEN = re.compile(r"(?<![\w…])[A-Za-z_][\w]*(?![\w…])")
# A template argument naming what a kernel computes: a functor, an op, a lambda.
_FUNCTOR = re.compile(r"lambda\(|[Ff]unctor|[a-z0-9]Ops?\b|Ops?<|_op\b|_functor|Func\b")
# Arguments that are machinery: pointer arrays, offset calculators, load/store policies.
_PLUMBING = re.compile(r"(?:array|Array|\w*OffsetCalculator|LoadWith\w*|StoreWith\w*|TensorInfo)\b")


@frozen
class Parts:
    """A demangled function name split at its top level."""

    scope: str  # qualifiers before the function name, "" when none ("at::native")
    base: str  # function name without template arguments
    args: tuple[str, ...] | None  # top-level template arguments; None when not a template
    params: str | None  # parameter list without its parentheses; None when absent


def flat(name: str) -> str:
    return " ".join(name.split())


def cut(text: str, limit: int) -> str:
    """`text` itself when it fits, else its head and tail around an ellipsis."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit]
    head = (limit - 1) * 2 // 3
    tail = limit - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _match(s: str, i: int) -> int:
    """Index of the bracket closing the one at s[i]; -1 when unbalanced."""
    stack = []
    for j in range(i, len(s)):
        ch = s[j]
        if ch in _OPEN:
            stack.append(_OPEN[ch])
        elif ch in _CLOSE:
            if not stack or stack.pop() != ch:
                return -1
            if not stack:
                return j
    return -1


def _split_top(s: str, sep: str) -> list[str] | None:
    """`s` split at `sep` outside brackets; None when the brackets do not balance."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    if depth:
        return None
    parts.append(s[start:])
    return parts


def parse(name: str) -> Parts | None:
    """The parts of `[void] scope::base<args>(params)`; None for names of another shape."""
    s = _ANON.sub(_ANON_MARK, flat(name))
    if s.startswith("void "):
        s = s[5:]
    s = _CALL_OP.sub("", s)
    if _OPERATOR.search(s) or not s:
        return None
    qual, params = s, None
    depth = 0
    for i, ch in enumerate(s):
        if ch in "<[":
            depth += 1
        elif ch in ">]":
            depth -= 1
        elif ch == "(" and depth == 0:
            end = _match(s, i)
            if end != len(s) - 1 or i == 0:
                return None
            qual, params = s[:i].strip(), s[i + 1 : end]
            break
    comps = _split_top(qual, "::")
    if not comps:
        return None
    last = comps[-1]
    args: tuple[str, ...] | None = None
    lt = last.find("<")
    if lt >= 0:
        end = _match(last, lt)
        if end != len(last) - 1:
            return None
        split = _split_top(last[lt + 1 : end], ",")
        if split is None:
            return None
        args = tuple(a.strip() for a in split if a.strip())
        last = last[:lt]
    if not _IDENT.match(last) or (args is None and params is None):
        return None
    return Parts("::".join(c.strip() for c in comps[:-1]), last, args, params)


def _drop_param_lists(s: str) -> str:
    """Remove `(...)` that follows a name or `>` (a parameter list), keeping casts and lambdas."""
    out, i = [], 0
    while i < len(s):
        ch = s[i]
        if ch == "(" and i and (s[i - 1].isalnum() or s[i - 1] in "_>") and not s.endswith("lambda", 0, i):
            end = _match(s, i)
            if end > 0:
                i = end + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def compact(text: str) -> str:
    """A template argument (or parameter list) without the parts readers skip."""
    s = _ANON.sub(_ANON_MARK, flat(text))
    s = _VOID.sub("", s)
    s = _LAMBDA.sub(lambda m: "lambda" + (m.group(1) or m.group(2)), s)
    s = _CALL_OP.sub("", s)
    s = _drop_param_lists(s)
    s = _LAMBDA_CHAIN.sub(r"\1", s)
    s = _CAST.sub(lambda m: {"(bool)0": "false", "(bool)1": "true"}.get(m.group(0), m.group(1)), s)
    s = _QUALIFIER.sub("", s).replace(_ANON_MARK + "::", "")
    s = _PTR.sub(r"\1", s)
    s = _SPACES.sub(" ", s).strip().replace("> >", ">>").replace("> >", ">>")
    # A lambda inside a one-argument function template (`gpu_kernel_impl<F>::lambda(int)`)
    # is that template's machinery; the functor F it was instantiated with is what differs.
    m = _LAMBDA_IN_TEMPLATE.match(s)
    if m and len(_split_top(m.group(1), ",") or ()) == 1 and not _SCALAR_TYPE.fullmatch(m.group(1)):
        return m.group(1)
    return s


def is_functor(arg: str | None) -> bool:
    """Does a compacted template argument say what the kernel computes (a functor, an op, a
    lambda), rather than how (vector widths, scalar types, pointer arrays, offset calculators)?"""
    return arg is not None and _FUNCTOR.search(arg) is not None and not _PLUMBING.match(arg)


def _rank(rows: list[tuple[str | None, ...]], p: int, n_args: int) -> int:
    """Which positions tell kernels apart best for a reader: functors first, then other
    template arguments, then the parameter list, then the enclosing scope."""
    if p >= n_args:
        return 3 + (p - n_args)
    values = [v for r in rows if (v := r[p]) is not None]
    if any(is_functor(v) for v in values):
        return 0
    return 2 if all(_PLUMBING.match(v) for v in values) else 1


def _pick(rows: list[tuple[str | None, ...]], n_args: int | None = None) -> list[int]:
    """The fewest positions whose values tell the rows apart, tried in reading order (_rank;
    most varied first within a rank). `n_args`: how many of the positions are template
    arguments (the rest: parameter list, scope)."""
    width = len(rows[0]) if rows else 0
    n_args = width if n_args is None else n_args
    varied = [p for p in range(width) if len({r[p] for r in rows}) > 1]
    order = sorted(varied, key=lambda p: (_rank(rows, p, n_args), -len({r[p] for r in rows}), p))
    chosen: list[int] = []
    for p in order:
        chosen.append(p)
        if len({tuple(r[q] for q in chosen) for r in rows}) == len(rows):
            break
    return sorted(chosen)


def _structured(group: list[Parts]) -> list[str]:
    """Labels for parsed names sharing one function name (in `group` order)."""
    width = max(len(p.args or ()) for p in group)
    rows = [
        tuple(compact(p.args[i]) if p.args and i < len(p.args) else None for i in range(width))
        + (compact(p.params) if p.params is not None else None, p.scope.split("::")[-1])
        for p in group
    ]
    unique = list(dict.fromkeys(rows))
    chosen = _pick(unique, width) if len(unique) > 1 else []
    labels = []
    for p, row in zip(group, rows, strict=True):
        # What the kernel computes is always shown, alone or among its family, so the same
        # kernel reads the same in every report.
        functor = next((i for i in range(width) if is_functor(row[i])), None)
        params = row[width] if width in chosen else None
        args = [a for i in chosen if i < width and (a := row[i]) is not None]
        if functor is not None and functor not in chosen:
            with_functor = [a for i in sorted({*chosen, functor}) if i < width and (a := row[i]) is not None]
            if _fit(p.base, with_functor, params)[1]:  # shown only when it fits without a blind cut
                args = with_functor
        if not args and p.base in WRAPPERS and p.args and row[0] is not None:
            args = [row[0]]
        label = _assemble(p.base, args, params)
        scope = row[width + 1] if width + 1 in chosen else None
        labels.append(cut(f"{compact(scope)}::{label}" if scope else label, LABEL_MAX))
    return labels


def _assemble(base: str, args: list[str], params: str | None) -> str:
    """`base<args>(params)` within LABEL_MAX (see _fit_args)."""
    return _fit(base, args, params)[0]


def _fit(base: str, args: list[str], params: str | None) -> tuple[str, bool]:
    """(`base<args>(params)` within LABEL_MAX, whether it needed no blind cut). Reductions
    in order until it fits: tighter spacing; scalar type arguments of nested templates
    dropped and `::lambda(T)` written `(T)`; the last words of long identifiers dropped
    (shorten_words); each argument reduced to its innermost functor (core). Only then the
    arguments are cut keeping more of their tail (the innermost functor comes last)."""
    tail = f"({params})" if params is not None else ""
    if not args:
        return cut(base + tail, LABEL_MAX), len(base + tail) <= LABEL_MAX
    room = LABEL_MAX - len(base) - 2 - len(tail)
    inner = ", ".join(args)
    if room < 8:
        whole = f"{base}<{inner}>{tail}"
        return cut(whole, LABEL_MAX), len(whole) <= LABEL_MAX
    for form in (inner, ",".join(a.replace(", ", ",") for a in args)):
        if len(form) <= room:
            return f"{base}<{form}>{tail}", True

    def reduce(arg: str) -> str:
        return _LAMBDA_CALL.sub("", _drop_scalars(arg.replace(", ", ",")))

    tight = ",".join(reduce(a) for a in args)
    if len(tight) > room:
        tight = shorten_words(tight, room)
    if len(tight) > room:
        tight = shorten_words(",".join(reduce(core(a)) for a in args), room)
    return f"{base}<{cut_tail(tight, room)}>{tail}", len(tight) <= room


def core(arg: str) -> str:
    """What a nested functor argument computes: its last functor identifier (not a lambda)
    with what follows it at that bracket depth, marked as a part by a leading "…"
    (`ReduceOp<func_wrapper_t<float,sum_functor<float>::lambda(float,float)>,4>` ->
    `…sum_functor<float>::lambda(float,float)`); the argument itself when that is all of it."""
    found = [m for m in _IDENT_TOKEN.finditer(arg) if m.group() != "lambda" and is_functor(m.group())]
    if not found or found[-1].start() == 0:
        return arg
    start = found[-1].start()
    depth, end = 0, len(arg)
    for i in range(start, len(arg)):
        ch = arg[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                end = i
                break
        elif ch == "," and depth == 0:
            end = i
            break
    return ELLIPSIS + arg[start:end]


def _words(ident: str) -> list[str]:
    """An identifier's words: `direct_copy_kernel_cuda` -> direct_, copy_, kernel_, cuda;
    `AUnaryFunctor` -> AUnary, Functor."""
    return re.findall(r"[A-Z]*[a-z0-9]*_*|[A-Z]+_*|_+", ident)


def shorten_words(text: str, limit: int) -> str:
    """`text` within `limit` by dropping the last words of its longest identifiers (the last
    identifier, usually the innermost functor, last of all), each cut marked "…": brackets stay
    balanced and no identifier is cut inside a word (`direct_copy_kernel_cuda::lambda(long)`
    -> `direct_copy_kernel…::lambda(long)`, `4,AUnaryFunctor<MulFunctor<float>>` ->
    `4,AUnary…<MulFunctor<float>>`). Returns the shortest form when even that is too long."""
    if _IDENT_TOKEN.fullmatch(text):
        return text  # one token-soup identifier (a CUTLASS name): its tail differs, cut_tail keeps it
    done: set[int] = set()  # each identifier is shortened once, to at least MIN_WORD characters
    while len(text) > limit:
        idents = [m for m in _IDENT_TOKEN.finditer(text) if not _SCALAR_TYPE.fullmatch(m.group())]
        candidates = []
        for k, m in enumerate(idents):
            words = [w for w in _words(m.group()) if w]
            if m.start() not in done and len(words) > 1 and len(words[0].rstrip("_")) >= MIN_WORD:
                candidates.append((k == len(idents) - 1, m, words))
        if not candidates:
            return text
        _, m, words = max(candidates, key=lambda c: (not c[0], len(c[1].group()), -c[1].start()))
        over = len(text) - limit
        keep = len(words) - 1
        while keep > 1 and len(m.group()) - len("".join(words[:keep]).rstrip("_")) - len(ELLIPSIS) < over:
            keep -= 1
        short = "".join(words[:keep]).rstrip("_") + ELLIPSIS
        text = text[: m.start()] + short + text[m.end() :]
        done = {i if i < m.start() else i - (m.end() - m.start() - len(short)) for i in done} | {m.start()}
    return text


def _drop_scalars(arg: str) -> str:
    """`BinaryFunctor<float,float,float,MulFunctor<float>>` -> `BinaryFunctor<MulFunctor<float>>`."""
    previous = None
    while previous != arg:
        previous, arg = arg, _SCALAR_ARG.sub("", arg)
    return arg


def cut_tail(text: str, limit: int) -> str:
    """Like cut(), keeping two thirds of the room for the tail, both parts ending and
    starting at a word boundary when one is near (never more than a third of a part lost)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 3
    tail = limit - 1 - head
    cut_at = max((m.end() for m in _BOUNDARY.finditer(text, 0, head + 1) if m.end() <= head), default=head)
    h = text[:cut_at] if cut_at >= head * 2 // 3 else text[:head]
    starts = [m.start() for m in _BOUNDARY.finditer(text, len(text) - tail) if m.start() >= len(text) - tail]
    from_at = starts[0] if starts and len(text) - starts[0] >= tail * 2 // 3 else len(text) - tail
    return h + ELLIPSIS + text[from_at:]


def _plain(names: list[str]) -> dict[str, str]:
    """Whole when short, else head...tail. Long names of one family (same first
    `_`-separated token, at least two of them) are all shown by their first and last tokens
    around the tokens that not every name of the family has:
    `sm80…tilesize64x256x8_warpsize1x4x1…cublas`."""
    out = {n: cut(flat(n), LABEL_MAX) for n in names}
    # Every cut name of a family is shown the same way, clashing or not.
    clashing = [n for n in names if len(flat(n)) > LABEL_MAX]
    families: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for n in clashing:
        tokens = flat(n).split("_")
        if len(tokens) >= 3:
            families[tokens[0]].append((n, tokens))
    for family in families.values():
        common = set.intersection(*(set(t) for _, t in family)) if len(family) > 1 else set()
        for n, tokens in family:
            kept = [t for t in tokens[1:-1] if t not in common]
            if kept:
                out[n] = cut(ELLIPSIS.join((tokens[0], "_".join(kept), tokens[-1])), LABEL_MAX)
    return out


def digest(name: str) -> str:
    """Hex SHA-1 of the full name (the source of ` #xxxx` suffixes)."""
    return hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()


def with_suffix(label: str, name: str, digits: int) -> str:
    suffix = SUFFIX_SEP + digest(name)[:digits]
    return cut(label, LABEL_MAX - len(suffix)) + suffix


def candidates(names: Iterable[str]) -> dict[str, str]:
    """Readable labels before collisions are resolved (may coincide)."""
    uniq = sorted(set(names))
    parsed = {n: parse(n) for n in uniq}
    groups: dict[str, list[str]] = defaultdict(list)
    plain = []
    for n in uniq:
        p = parsed[n]
        if p is None:
            plain.append(n)
        else:
            groups[p.base].append(n)
    out = _plain(plain)
    for members in groups.values():
        parts = [parsed[n] for n in members]
        out.update(zip(members, _structured(parts), strict=True))  # type: ignore[arg-type]
    return out


def kernel_labels(names: Iterable[str]) -> dict[str, str]:
    """Full name -> label for every distinct name: distinct, at most LABEL_MAX characters."""
    cands = candidates(names)
    labels = {n: (c if c else with_suffix("", n, HASH_DIGITS)) for n, c in cands.items()}
    digits = dict.fromkeys(cands, 0)
    while True:
        by_label: dict[str, list[str]] = defaultdict(list)
        for n, label in labels.items():
            by_label[label].append(n)
        clashes = [g for g in by_label.values() if len(g) > 1]
        if not clashes:
            return labels
        if all(digits[n] >= MAX_HASH_DIGITS for g in clashes for n in g):
            break
        for group in clashes:
            for n in group:
                digits[n] = HASH_DIGITS if digits[n] == 0 else min(digits[n] + 2, MAX_HASH_DIGITS)
                labels[n] = with_suffix(cands[n], n, digits[n])
    # Equal SHA-1 of two different names: number them in name order (never seen in practice).
    ranks = {n: i for i, n in enumerate(sorted(labels))}
    return {n: with_suffix(cands[n], n, 8) + f".{ranks[n]}" for n in labels}


LABEL_COLUMN = "label"
# CSV stem -> the column holding a kernel name (the label column goes right after it).
KERNEL_TABLES: dict[str, str] = {
    "kernels": "name",
    "kernels_by_pid": "name",
    "tiny_kernels": "name",
    "launch_overhead_kernels": "name",
    "kernel_category_names": "name",
    "compute_kernels": "name",
    "gemm_precision": "name",
    "operator_kernels": "kernel",
    "step_work_kernels": "name",
    "ncu_kernels": "name",
    "ncu_launches": "kernel",
}
# metric id -> {list key in the metric's data: record key holding a kernel name, or a list of them}
KERNEL_FIELDS: dict[str, dict[str, str]] = {
    "top_kernels": {"kernels": "name"},
    "per_process": {"top_kernels": "name"},
    "launch_storm": {"tiny_kernels": "name"},
    "launch_overhead": {"top_kernels": "name"},
    "categories": {"top_uncategorized": "name"},
    "communication": {"top_kernels": "name"},
    "steps": {"outliers": "kernel_name"},
    "step_work": {"names": "name"},
    "fusion_candidates": {"candidates": "kernels"},
    "compute_efficiency": {"kernels": "name"},
    "gemm_precision": {"fp32_kernels": "name"},
    "ncu_plan": {"targets": "name"},
    "operators": {"operator_kernels": "kernel"},
    "ncu": {"kernels": "name", "launches": "kernel"},
}


def _names_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        yield from (v for v in value if isinstance(v, str))


def kernel_names(metrics: Mapping[str, Outcome]) -> set[str]:
    """Every kernel name the metrics' data and CSV tables hold."""
    names: set[str] = set()
    for mid, outcome in metrics.items():
        if not isinstance(outcome, MetricResult):
            continue
        section = outcome.data  # what report.json shows of the metric: the names to label
        for key, field in KERNEL_FIELDS.get(mid, {}).items():
            rows = section.get(key)
            if isinstance(rows, list):
                for row in rows:
                    if isinstance(row, dict):
                        names.update(_names_in(row.get(field)))
        for table in outcome.tables:
            column = KERNEL_TABLES.get(table.name)
            if column is not None and table.frame is not None and column in table.frame:
                names.update(str(n) for n in table.frame[column].dropna().unique())
    return names


class Labels:
    """Full kernel name -> label, for the names of one report (see module docstring)."""

    def __init__(self, names: Iterable[str]) -> None:
        self._map = kernel_labels(names)

    def __call__(self, name: object) -> str:
        if not isinstance(name, str):
            return "" if name is None else str(name)
        found = self._map.get(name)
        if found is not None:
            return found
        # Not one of the report's names (a caller's own string): shortened, always suffixed,
        # so it cannot pass for one of them.
        suffix = " #" + digest(name)[:8]
        return cut(" ".join(name.split()), LABEL_MAX - len(suffix)) + suffix

    def __len__(self) -> int:
        return len(self._map)

    def items(self) -> Iterable[tuple[str, str]]:
        return self._map.items()


_last: tuple[tuple[Outcome, ...], Labels] | None = None  # rules and writers ask for the same report's


def labels_for(metrics: Mapping[str, Outcome]) -> Labels:
    """The labels of one report's kernel names, computed once when asked again for the same
    metric results (the same objects: a results dict and its copy in the Report)."""
    global _last
    outcomes = tuple(metrics.values())
    cached = _last
    if cached is not None and len(cached[0]) == len(outcomes) and all(
        a is b for a, b in zip(cached[0], outcomes, strict=True)
    ):
        return cached[1]
    labels = Labels(kernel_names(metrics))
    _last = (outcomes, labels)
    return labels


__all__ = [
    "KERNEL_FIELDS",
    "KERNEL_TABLES",
    "LABEL_COLUMN",
    "LABEL_MAX",
    "Labels",
    "kernel_names",
    "labels_for",
    "Parts",
    "compact",
    "cut",
    "digest",
    "kernel_labels",
    "parse",
]
