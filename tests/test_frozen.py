"""@frozen behaves as @dataclass(frozen=True) does: each check makes the same class both ways
and compares what the two do."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsys_llm_explainer.frozen import frozen


def both(body: str, bases: str = "") -> tuple[type, type]:
    """The class `body` made by @dataclass(frozen=True) and by @frozen."""
    made = []
    for deco in ("@dataclass(frozen=True)", "@frozen"):
        ns: dict[str, object] = {"__name__": __name__, "dataclass": dataclass, "frozen": frozen, "field": field,
                                 "ClassVar": ClassVar}
        exec(f"from __future__ import annotations\n{deco}\nclass Rec{bases}:\n{body}", ns)  # noqa: S102
        made.append(ns["Rec"])
    return made[0], made[1]


ROW = """
    KIND: ClassVar[str] = "row"
    name: str
    count: int = 0
    tags: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict, compare=False, repr=False)
    status: str = field(default="ok", init=False)
"""


def test_fields_defaults_and_class_attributes_match():
    ref, rec = both(ROW)
    assert [(f.name, f.type, f.init, f.repr, f.compare) for f in dataclasses.fields(rec)] == [
        (f.name, f.type, f.init, f.repr, f.compare) for f in dataclasses.fields(ref)]
    assert dataclasses.is_dataclass(rec)
    assert rec.count == 0 and rec.KIND == "row" and rec.status == "ok"
    assert not hasattr(rec, "extra") and not hasattr(ref, "extra")  # a factory field has no class default
    assert rec.__match_args__ == ref.__match_args__ == ("name", "count", "tags", "extra")


@given(st.text(max_size=5), st.integers(-3, 3), st.lists(st.text(max_size=2), max_size=3),
       st.integers(-3, 3), st.booleans())
def test_init_eq_hash_repr_match(name, count, tags, other_count, by_keyword):
    ref, rec = both(ROW)
    args = {"name": name, "count": count, "tags": tuple(tags)}
    if by_keyword:
        a_ref, a_rec = ref(**args), rec(**args)
    else:
        a_ref, a_rec = ref(name, count, tuple(tags)), rec(name, count, tuple(tags))
    b_ref, b_rec = ref(name, other_count, extra={"x": 1}), rec(name, other_count, extra={"x": 1})
    assert repr(a_rec) == repr(a_ref) and repr(b_rec) == repr(b_ref)
    assert (a_rec == b_rec) == (a_ref == b_ref)
    assert hash(a_rec) == hash(a_ref) and hash(b_rec) == hash(b_ref)  # the same tuple is hashed
    assert dataclasses.asdict(a_rec) == dataclasses.asdict(a_ref)
    assert a_rec.status == "ok" and a_rec.extra == {} and a_rec.extra is not rec(name).extra
    assert dataclasses.replace(a_rec, count=count + 1) == rec(name, count + 1, tuple(tags))


@given(st.permutations(["name", "count", "tags", "extra"]))
def test_every_field_by_name_in_any_order_matches(order):
    ref, rec = both(ROW)
    values = {"name": "n", "count": 3, "tags": ("t",), "extra": {"k": 2}}
    kwargs = {k: values[k] for k in order}
    a_ref, a_rec = ref(**kwargs), rec(**kwargs)
    assert dataclasses.asdict(a_rec) == dataclasses.asdict(a_ref) and a_rec == rec("n", 3, ("t",), {"k": 2})
    assert list(vars(a_rec)) == ["name", "count", "tags", "extra", "status"]  # field order, not call order
    assert a_rec.status == "ok"


def test_equality_needs_the_same_class():
    ref, rec = both(ROW)
    other_ref, other_rec = both(ROW)
    assert rec("a") != other_rec("a") and ref("a") != other_ref("a")
    assert rec("a") != ("a", 0, ()) and rec("a").__eq__(("a", 0, ())) is NotImplemented


def test_assignment_and_deletion_raise():
    _, rec = both(ROW)
    r = rec("a")
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'count'"):
        r.count = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.anything = 1
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'name'"):
        del r.name


@pytest.mark.parametrize("call, message", [
    (lambda rec: rec(), "missing required argument: 'name'"),
    (lambda rec: rec("a", 1, (), {}, "x"), "takes 4 positional arguments but 5 were given"),
    (lambda rec: rec("a", nope=1), "unexpected keyword argument 'nope'"),
    (lambda rec: rec("a", name="b"), "multiple values for argument 'name'"),
    (lambda rec: rec("a", status="x"), "unexpected keyword argument 'status'"),  # init=False
])
def test_bad_arguments_raise_type_error(call, message):
    ref, rec = both(ROW)
    with pytest.raises(TypeError):
        call(ref)
    with pytest.raises(TypeError, match=message):
        call(rec)


def test_inheritance_puts_the_base_fields_first():
    base = frozen(type("Base", (), {"__annotations__": {"a": "int", "b": "int"}, "b": 2}))
    child = frozen(type("Child", (base,), {"__annotations__": {"c": "int"}, "c": 3}))
    assert [f.name for f in dataclasses.fields(child)] == ["a", "b", "c"]
    assert repr(child(1)) == "Child(a=1, b=2, c=3)" and child(1) != base(1)

    @dataclass(frozen=True)
    class Plain(base):  # a dataclass subclass reads its base's parameters
        d: int = 4

    assert Plain(1).d == 4 and dataclasses.fields(Plain)[-1].name == "d"


def test_a_field_declared_again_keeps_its_place():
    made = []
    for deco in (dataclass(frozen=True), frozen):
        base = deco(type("Base", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1, "b": 2}))
        made.append(deco(type("Child", (base,), {"__annotations__": {"c": "int", "a": "int"}, "c": 3, "a": 9})))
    ref, rec = made
    assert [f.name for f in dataclasses.fields(rec)] == [f.name for f in dataclasses.fields(ref)] == ["a", "b", "c"]
    assert repr(rec()) == repr(ref()).replace(ref.__qualname__, rec.__qualname__) == "Child(a=9, b=2, c=3)"


def test_field_objects_are_made_when_first_asked_for():
    _, rec = both(ROW)
    assert not isinstance(vars(rec)["__dataclass_fields__"], dict)  # not made with the class
    r = rec("a", 2)
    assert r == rec(name="a", count=2) and hash(r) == hash(rec("a", 2))
    assert not isinstance(vars(rec)["__dataclass_fields__"], dict)  # nor to make or compare instances
    assert dataclasses.replace(r, count=3) == rec("a", 3)
    assert isinstance(vars(rec)["__dataclass_fields__"], dict)  # made once, then a plain attribute
    assert dataclasses.asdict(r) == {"name": "a", "count": 2, "tags": (), "extra": {}, "status": "ok"}


def test_methods_the_class_defines_are_kept():
    ref, rec = both("""
    x: int
    def __repr__(self):
        return "mine"
    def __eq__(self, other):
        return True
""")
    assert repr(rec(1)) == repr(ref(1)) == "mine" and rec(1) == rec(2)
    assert hash(rec(1)) == hash(ref(1)) == hash((1,))  # __eq__ alone does not make a __hash__ its own
    with pytest.raises(TypeError, match="cannot define __setattr__"):
        frozen(type("Bad", (), {"__annotations__": {"x": "int"}, "__setattr__": lambda s, n, v: None}))


def test_copies_and_pickles_keep_the_values():
    _, rec = both(ROW)
    r = rec("a", 2, ("t",), {"k": [1]})
    globals()["Rec"] = rec  # pickle finds the class by its module and name
    rec.__qualname__ = "Rec"
    try:
        back = pickle.loads(pickle.dumps(r))
    finally:
        del globals()["Rec"]
    assert back == r and back.extra == {"k": [1]} and back.status == "ok"
    deep = copy.deepcopy(r)
    assert deep == r and deep.extra == r.extra and deep.extra is not r.extra
