"""@frozen: an immutable record class, as `@dataclass(frozen=True)` makes it, made cheaply.

The package defines over two hundred frozen record classes (typed results, rows, options,
the trace's tables), and every run imports nearly all of them. `dataclasses` writes each
class's methods as source text and compiles it (six functions a class), which cost about
1.6 ms a class on Python 3.11: some 0.3 s of a one-second report. `frozen` keeps the
behaviour and shares the methods instead: `__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__` and `__delattr__` are written once below and read each class's field list,
so making a class costs about a tenth as much, and an instance the same.

What a class gets is what `@dataclass(frozen=True)` gives it, and `dataclasses.fields`,
`asdict`, `replace` and `is_dataclass` work on it (its Field objects are made the first time
one of them asks: most classes are never asked):
- fields are the annotated class attributes in order, a base record's first; `ClassVar`
  annotations are not fields; a default is a plain value or `dataclasses.field(default=...,
  default_factory=..., init=..., repr=..., compare=..., hash=...)`;
- `__init__` takes the init fields, positionally or by name; a non-init field gets its default;
- `__eq__` compares two instances of the same class field by field (compare=True fields),
  `__hash__` hashes the same fields, `__repr__` shows the repr=True fields;
- assigning or deleting an attribute raises dataclasses.FrozenInstanceError;
- a method the class body defines itself is kept (as dataclasses keeps it).
Not supported, because nothing here uses them: `__post_init__`, InitVar, keyword-only fields,
ordering and slots.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
_MISSING: Any = dataclasses.MISSING
_FIELD = dataclasses._FIELD  # type: ignore[attr-defined]  # what dataclasses.fields() lists


@dataclasses.dataclass(frozen=True)
class _Params:
    """Only for its __dataclass_params__ (init, repr, eq, frozen), which a @dataclass subclass reads."""


class _Spec(typing.NamedTuple):
    init: tuple[str, ...]  # the __init__ parameters, in order
    defaults: Mapping[str, Any]  # init field -> default value
    factories: Mapping[str, Callable[[], Any]]  # init field -> default_factory
    fixed: tuple[tuple[str, Any, Callable[[], Any] | None], ...]  # non-init fields: default, factory
    shown: tuple[str, ...]  # repr=True
    compared: tuple[str, ...]  # compare=True
    hashed: tuple[str, ...]  # hash=True, or hash=None and compare=True
    explicit: Mapping[str, dataclasses.Field[Any]]  # the class body's own dataclasses.field(...)


_NONE: Mapping[str, Any] = MappingProxyType({})  # shared by every class without such entries


def _is_classvar(annotation: object) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is typing.ClassVar or typing.get_origin(annotation) is typing.ClassVar


def _spec(obj: object) -> _Spec:
    spec: _Spec = type(obj).__frozen_spec__  # type: ignore[attr-defined]
    return spec


def _bind(cls: type, spec: _Spec, values: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The init fields from positional and keyword arguments, defaults and factories, in
    field order (as a dataclass's __init__ binds them)."""
    names = spec.init
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} positional arguments but {len(args)} were given")
    values.update(zip(names, args, strict=False))  # fewer args than names: the rest below
    if kwargs or len(args) < len(names):
        for name in names[len(args):]:
            if name in kwargs:
                values[name] = kwargs.pop(name)
            elif name in spec.defaults:
                values[name] = spec.defaults[name]
            elif name in spec.factories:
                values[name] = spec.factories[name]()
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
        if kwargs:
            name = next(iter(kwargs))
            why = "multiple values for argument" if name in names else "an unexpected keyword argument"
            raise TypeError(f"{cls.__name__}() got {why} {name!r}")


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    spec = _spec(self)
    names = spec.init
    values = self.__dict__
    if not kwargs and len(args) == len(names):  # every field by position
        values.update(zip(names, args, strict=True))
    elif not args and len(kwargs) == len(names):
        # every field by name (the usual call for records with many fields): no per-field
        # branch; as many keywords as fields and none missing means exactly the fields
        try:
            values.update(zip(names, map(kwargs.__getitem__, names), strict=True))
        except KeyError:  # an unknown keyword in place of a field: _bind says which
            _bind(type(self), spec, values, args, kwargs)
    else:
        _bind(type(self), spec, values, args, kwargs)
    for name, default, factory in spec.fixed:
        values[name] = factory() if factory is not None else default


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _spec(self).shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _spec(self).compared
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in _spec(self).hashed))


def _setattr(self: Any, name: str, value: object) -> None:
    if "__frozen_spec__" in type(self).__dict__ or name in type(self).__dataclass_fields__:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _delattr(self: Any, name: str) -> None:
    if "__frozen_spec__" in type(self).__dict__ or name in type(self).__dataclass_fields__:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


def _own(cls: type) -> Iterator[tuple[str, object]]:
    """The class body's own fields: (name, annotation), in order."""
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if not _is_classvar(annotation):
            yield name, annotation


def _fields(cls: type, explicit: Mapping[str, dataclasses.Field[Any]]) -> dict[str, dataclasses.Field[Any]]:
    """The class's fields as dataclasses.fields() lists them, its bases' first."""
    fields: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        fields.update(getattr(base, "__dataclass_fields__", {}))
    for name, annotation in _own(cls):
        field: dataclasses.Field[Any] = explicit.get(name) or dataclasses.field(
            default=cls.__dict__.get(name, _MISSING))
        field.name = name
        field.type = annotation
        field._field_type = _FIELD  # type: ignore[attr-defined]
        field.kw_only = False  # type: ignore[assignment]  # as dataclasses resolves it
        fields[name] = field
    return fields


def _factory(field: dataclasses.Field[Any]) -> Callable[[], Any] | None:
    factory: Any = field.default_factory
    return None if factory is _MISSING else typing.cast(Callable[[], Any], factory)


class _LazyFields:
    """A frozen class's __dataclass_fields__, made on first read (dataclasses.fields, asdict,
    replace): most record classes are never asked, and a Field object per field of every
    class would cost each run a few hundred KiB of start-up memory."""

    def __init__(self, owner: type) -> None:
        self.owner = owner

    def __get__(self, obj: object, cls: type | None = None) -> dict[str, dataclasses.Field[Any]]:
        owner = self.owner
        spec: _Spec = owner.__frozen_spec__  # type: ignore[attr-defined]
        fields = _fields(owner, spec.explicit)
        type.__setattr__(owner, "__dataclass_fields__", fields)  # read once: now a plain attribute
        return fields


def _one(names: list[str], init: tuple[str, ...]) -> tuple[str, ...]:
    """`names` as a tuple, the init tuple itself when equal (most classes: one tuple, not four)."""
    shown = tuple(names)
    return init if shown == init else shown


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(cls: type[T]) -> type[T]:
    """Make `cls` an immutable record (see the module's docstring)."""
    own = cls.__dict__
    for name in ("__setattr__", "__delattr__"):
        if name in own:
            raise TypeError(f"a frozen record cannot define {name}: {cls.__qualname__}")
    # name -> (name, default, factory, init, repr, compare, hash), the bases' fields first (a
    # field the class declares again keeps its place, as in dataclasses)
    found: dict[str, tuple[str, Any, Callable[[], Any] | None, bool, bool, bool, bool | None]] = {}
    for base in cls.__mro__[-1:0:-1]:
        for f in getattr(base, "__dataclass_fields__", {}).values():
            found[f.name] = (f.name, f.default, _factory(f), f.init, f.repr, f.compare, f.hash)
    explicit: dict[str, dataclasses.Field[Any]] = {}
    for name, _ in _own(cls):
        value = own.get(name, _MISSING)
        if isinstance(value, dataclasses.Field):
            explicit[name] = value
            if value.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, value.default)
            found[name] = (name, value.default, _factory(value), value.init, value.repr, value.compare, value.hash)
        else:
            found[name] = (name, value, None, True, True, True, None)
    rows = list(found.values())
    init = tuple(r[0] for r in rows if r[3])
    defaults = {r[0]: r[1] for r in rows if r[3] and r[1] is not _MISSING}
    factories = {r[0]: r[2] for r in rows if r[3] and r[2] is not None}
    spec = _Spec(
        init=init,
        defaults=defaults or _NONE,
        factories=factories or _NONE,
        fixed=tuple((r[0], r[1], r[2]) for r in rows if not r[3]),
        shown=_one([r[0] for r in rows if r[4]], init),
        compared=_one([r[0] for r in rows if r[5]], init),
        hashed=_one([r[0] for r in rows if (r[5] if r[6] is None else r[6])], init),
        explicit=explicit or _NONE,
    )
    target: Any = cls  # the attributes dataclasses would set, and __frozen_spec__
    target.__dataclass_fields__ = _LazyFields(cls)
    target.__dataclass_params__ = _Params.__dataclass_params__  # type: ignore[attr-defined]
    target.__frozen_spec__ = spec
    # a class's own __eq__ without __hash__ leaves __hash__ None in its body: not an explicit one
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    methods: dict[str, object] = {"__init__": _init, "__repr__": _repr, "__eq__": _eq, "__setattr__": _setattr,
                                  "__delattr__": _delattr, "__match_args__": spec.init}
    for name, method in methods.items():
        if name not in own:
            setattr(target, name, method)
    if not explicit_hash:
        target.__hash__ = _hash
    return cls


__all__ = ["frozen"]
