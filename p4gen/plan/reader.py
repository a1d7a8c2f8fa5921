"""Reading a JSON document into frozen dataclasses, naming the place of the first problem: the
reader that :func:`p4gen.plan.Plan.from_json` parses plan.json with."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..decision import FrozenMap
from ..errors import PlanError

JSON_TYPE = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
              bool: "a boolean", type(None): "null"}


def kind_of(value: Any) -> str:
    return JSON_TYPE.get(type(value), "that")


class Reader:
    """Reads one JSON document into dataclasses, naming the place of the first problem."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, msg: str) -> PlanError:
        return PlanError(f"{self.source}: {msg}")

    def get(self, obj: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in obj:
            raise self.fail(f"{where} lacks the key {key!r}") if where else PlanError(
                f"{self.source} lacks the key {key!r}")
        return obj[key]

    def typed(self, value: Any, kind: type, where: str) -> Any:
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise self.fail(f"{where} must be {JSON_TYPE[kind]}, not {kind_of(value)}")
        return value

    def obj(self, value: Any, where: str) -> Mapping[str, Any]:
        return self.typed(value, dict, where)

    def items(self, value: Any, where: str) -> list[Mapping[str, Any]]:
        self.typed(value, list, where)
        for i, item in enumerate(value):
            self.typed(item, dict, f"{where}[{i}]")
        return value

    def int_map(self, value: Any, where: str) -> Mapping[str, int]:
        self.obj(value, where)
        for k, v in value.items():
            self.typed(v, int, f"{where}.{k}")
        return FrozenMap(dict(value))

    def record(self, cls: type, value: Any, where: str, **fixed: Any) -> Any:
        """An instance of dataclass ``cls`` from the object ``value``: every field of a JSON type is read
        and type-checked (fields with defaults may be absent); ``fixed`` gives the others."""
        self.obj(value, where)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in fixed:
                kwargs[f.name] = fixed[f.name]
                continue
            if f.name not in value:
                if f.default is dataclasses.MISSING:
                    raise self.fail(f"{where} lacks the key {f.name!r}")
                continue
            v = value[f.name]
            kind = FIELD_KINDS.get(f.type)
            if kind is None:
                raise TypeError(f"{cls.__name__}.{f.name}: no reader for {f.type}")
            kwargs[f.name] = kind(self, v, f"{where}.{f.name}")
        return cls(**kwargs)


def optional(kind: type):
    def read(r: Reader, v: Any, where: str):
        return None if v is None else r.typed(v, kind, where)
    return read


def names(r: Reader, v: Any, where: str) -> tuple[str, ...]:
    r.typed(v, list, where)
    return tuple(r.typed(x, str, f"{where}[{i}]") for i, x in enumerate(v))


def ints(r: Reader, v: Any, where: str) -> tuple[int, ...]:
    r.typed(v, list, where)
    return tuple(r.typed(x, int, f"{where}[{i}]") for i, x in enumerate(v))


FIELD_KINDS = {
    "int": lambda r, v, w: r.typed(v, int, w), "str": lambda r, v, w: r.typed(v, str, w),
    "bool": lambda r, v, w: r.typed(v, bool, w), "float": lambda r, v, w: float(r.typed(v, float, w)),
    "int | None": optional(int), "str | None": optional(str), "float | None": optional(float),
    "tuple[str, ...]": names, "tuple[int, ...] | None": lambda r, v, w: None if v is None else ints(r, v, w),
    "Mapping[str, int]": lambda r, v, w: r.int_map(v, w),
}
