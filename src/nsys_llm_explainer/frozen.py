"""@frozen: an immutable record class, as `@dataclass(frozen=True)` makes it, made cheaply.

The package defines over two hundred frozen record classes (typed results, rows, options,
the trace's tables), and every run imports nearly all of them. `dataclasses` writes each
class's methods as source text and compiles it (six functions a class), which cost about
1.6 ms a class on Python 3.11: some 0.3 s of a one-second report. `frozen` keeps the
behaviour and shares the methods instead: `__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__` and `__delattr__` are written once below and read each class's field list,
so making a class costs about a tenth as much, and an instance the same.

What a class gets is what `@dataclass(frozen=True)` gives it, and `dataclasses.fields`,
`asdict`, `replace` and `is_dataclass` work on it:
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
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
_MISSING: Any = dataclasses.MISSING
_FIELD = dataclasses._FIELD  # type: ignore[attr-defined]  # what dataclasses.fields() lists


@dataclasses.dataclass(frozen=True)
class _Params:
    """Only for its __dataclass_params__ (init, repr, eq, frozen), which a @dataclass subclass reads."""


class _Spec(typing.NamedTuple):
    init: tuple[str, ...]  # the __init__ parameters, in order
    init_set: frozenset[str]  # the same, as a set
    defaults: dict[str, Any]  # init field -> default value
    factories: dict[str, Callable[[], Any]]  # init field -> default_factory
    fixed: tuple[tuple[str, Any, Callable[[], Any] | None], ...]  # non-init fields: default, factory
    shown: tuple[str, ...]  # repr=True
    compared: tuple[str, ...]  # compare=True
    hashed: tuple[str, ...]  # hash=True, or hash=None and compare=True


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
    if not args and len(kwargs) == len(names) and kwargs.keys() == spec.init_set:
        # every field by name (the usual call for records with many fields): no per-field branch
        values.update(zip(names, map(kwargs.__getitem__, names), strict=True))
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


def _fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """The class's fields, its bases' first; a Field in the class body becomes its default."""
    fields: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        fields.update(getattr(base, "__dataclass_fields__", {}))
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, dataclasses.Field):
            field = value
            if field.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, field.default)
        else:
            field = dataclasses.field(default=value)
        field.name = name
        field.type = annotation
        field._field_type = _FIELD  # type: ignore[attr-defined]
        field.kw_only = False  # type: ignore[assignment]  # as dataclasses resolves it
        fields[name] = field
    return fields


def _factory(field: dataclasses.Field[Any]) -> Callable[[], Any] | None:
    factory: Any = field.default_factory
    return None if factory is _MISSING else typing.cast(Callable[[], Any], factory)


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(cls: type[T]) -> type[T]:
    """Make `cls` an immutable record (see the module's docstring)."""
    own = cls.__dict__
    for name in ("__setattr__", "__delattr__"):
        if name in own:
            raise TypeError(f"a frozen record cannot define {name}: {cls.__qualname__}")
    fields = _fields(cls)
    spec = _Spec(
        init=tuple(n for n, f in fields.items() if f.init),
        init_set=frozenset(n for n, f in fields.items() if f.init),
        defaults={n: f.default for n, f in fields.items() if f.init and f.default is not _MISSING},
        factories={n: factory for n, f in fields.items() if f.init and (factory := _factory(f)) is not None},
        fixed=tuple((n, f.default, _factory(f)) for n, f in fields.items() if not f.init),
        shown=tuple(n for n, f in fields.items() if f.repr),
        compared=tuple(n for n, f in fields.items() if f.compare),
        hashed=tuple(n for n, f in fields.items() if (f.compare if f.hash is None else f.hash)),
    )
    target: Any = cls  # the attributes dataclasses would set, and __frozen_spec__
    target.__dataclass_fields__ = fields
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
