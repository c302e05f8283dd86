"""Many models at once from values already known to be valid, without validating them again.

For the two places that make a model per row of a large line: an Arrow snapshot's rows, whose
every rule was checked column-wise (models.arrow.decode), and a tick's result, whose values
the engine made (solver.placement.decode). And `collections_deferred`, for blocks that make
many objects and no cycles worth collecting: a tick, an explanation, an Arrow build, and the
server's decodes of a tick's result and forecasts, which validate many models that live on.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from types import GetSetDescriptorType, MemberDescriptorType
from typing import Any, TypeVar

from pydantic import BaseModel

from models.errors import InternalError

M = TypeVar("M", bound=BaseModel)


def _slot_setter(name: str) -> Callable[[object, object], None]:
    """The setter of one of BaseModel's slots (`__dict__` among them).

    BaseModel keeps these in slots; setting them through their descriptors is the cheapest way
    (object.__setattr__ looks the descriptor up at every call: a fifth of trusted_models'
    per-row loop).
    Read from the class __dict__: pydantic annotates these names with the instance values' types,
    not the slot descriptors the class holds.
    """
    descriptor: MemberDescriptorType | GetSetDescriptorType = vars(BaseModel)[name]
    return descriptor.__set__


_SET_DICT = _slot_setter("__dict__")
_SET_FIELDS_SET = _slot_setter("__pydantic_fields_set__")
_SET_EXTRA = _slot_setter("__pydantic_extra__")
_SET_PRIVATE = _slot_setter("__pydantic_private__")


def trusted_models(cls: type[M], columns: dict[str, Sequence[Any]], builder: str) -> list[M]:
    """One model per row from already-valid values: what model_construct does, but cheaper.

    model_construct costs twice as much per row (it fills defaults and counts the fields
    given). Here every field is given, so one fields_set (every field) is shared by all the
    rows: setting a field adds a name it already holds, and pydantic copies it before a copy
    changes it. Per model that saves a set, most of a small model's memory. `builder` names
    the caller in the error raised when the columns are not exactly the model's fields.
    """
    if columns.keys() != cls.model_fields.keys():
        raise InternalError(
            f"{builder} builds {cls.__name__} from {sorted(columns)},"
            f" but the model has {sorted(cls.model_fields)}"
        )
    if len({len(column) for column in columns.values()}) > 1:
        raise InternalError(f"{builder} builds {cls.__name__} from columns of unequal lengths")
    fields_set = set(columns)
    new = object.__new__
    models: list[M] = []
    append = models.append
    for values in map(_row_dict(tuple(columns)), *columns.values()):
        model = new(cls)
        _SET_DICT(model, values)
        _SET_FIELDS_SET(model, fields_set)
        _SET_EXTRA(model, None)
        _SET_PRIVATE(model, None)
        append(model)
    return models


@cache
def _row_dict(names: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """A function of one value per name returning the dict {name: value}.

    Written as a dict display with constant keys, which CPython builds in one step: per row
    of 13 fields, 40% cheaper than dict(zip(names, row)), and no row tuple is made. The names
    are a model's field names (identifiers), quoted with repr.
    """
    values = [f"v{i}" for i in range(len(names))]
    entries = ", ".join(f"{name!r}: {value}" for name, value in zip(names, values, strict=True))
    function: Callable[..., dict[str, Any]] = eval(f"lambda {', '.join(values)}: {{{entries}}}")
    return function


@contextmanager
def collections_deferred() -> Iterator[None]:
    """No garbage collection while the block makes many objects and no cycles worth
    collecting (a tick's working state, or models that live on: a result or forecasts
    decoded in a process that keeps them).

    Each 700 new objects start a collection of the youngest, and every tenth of those one of
    the middle generation; a block that adds 100,000 long-lived objects thus ran about 140
    young and 14 middle collections, enough to start a full one, which walks every object of
    the process (a server's: 300,000, 0.25 s each, measured). Deferred, the block's objects
    are walked once, by the young collection the next allocation after it starts. Another
    thread's block may overlap: the collector is enabled again by whichever block disabled it.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
