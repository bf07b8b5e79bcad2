"""Typed results (results/) built back from report.json sections, for tests that write a
metric's section as data: strictly (every field present, as a report holds it) or, for rule
tests that write only the keys a rule reads, with neutral values (0, "", None, empty) for
the others."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from nsys_llm_explainer import results
from nsys_llm_explainer.model import MetricResult


@cache
def result_types() -> dict[str, type]:
    """METRIC_ID -> its typed result class, for every class in results/ that has one."""
    out: dict[str, type] = {}
    for info in pkgutil.iter_modules(results.__path__):
        module = importlib.import_module(f"{results.__name__}.{info.name}")
        for obj in vars(module).values():
            if (isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__
                    and isinstance(getattr(obj, "METRIC_ID", None), str)):
                out[obj.METRIC_ID] = obj  # type: ignore[attr-defined]
    return out


def typed(metric_id: str, data: Mapping[str, Any], strict: bool = False) -> object | None:
    """The typed result of `metric_id` for its report.json section `data` (None when the
    metric has no typed result)."""
    cls = result_types().get(metric_id)
    return None if cls is None else _dataclass(cls, data, strict)


def _dataclass(cls: type, data: Mapping[str, Any], strict: bool) -> Any:
    data = dict(data)
    if cls.__name__ == "ProcessKernel":  # {"pid", **kernel row}
        pid = data.pop("pid", 0)
        data = {"pid": pid, "kernel": data}
    if cls.__name__ == "NcuPlan":  # ncu_targets.json's object, spread into the section
        data["plan"] = {"version": 1, **{k: data.pop(k, []) for k in ("metrics", "targets", "skipped")}}
    if cls.__name__ == "NcuLaunch":  # the launch object as written, and the parts rules read
        data["json"] = dict(data)
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = f.name.rstrip("_")  # global_: report.json's "global"
        if key in data:
            kwargs[f.name] = _value(hints[f.name], data[key], strict)
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        elif strict:
            raise KeyError(f"{cls.__name__}.{f.name}")
        else:
            kwargs[f.name] = _neutral(hints[f.name])
    return cls(**kwargs)


def _value(tp: Any, value: Any, strict: bool) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return _value(inner[0], value, strict) if len(inner) == 1 else value
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, strict)  # type: ignore[arg-type]
    if origin is tuple:
        return tuple(_value(args[0], v, strict) for v in value)
    if origin is list:
        return [_value(args[0], v, strict) for v in value]
    if origin in (dict, Mapping) and len(args) == 2:
        return {k: _value(args[1], v, strict) for k, v in value.items()}
    return value


def _neutral(tp: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        return None
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, {}, False)  # type: ignore[arg-type]
    return {tuple: (), list: [], dict: {}, Mapping: {}}.get(origin) if origin else \
        {int: 0, float: 0.0, str: "", bool: False}.get(tp)


def result(metric_id: str, data: dict[str, Any], tables: tuple[Any, ...] = ()) -> MetricResult:
    """A MetricResult of `data` as a metric returns it: with its typed result where it has one."""
    return MetricResult(metric_id, data, tables, typed=typed(metric_id, data))
