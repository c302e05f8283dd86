"""Many models at once from values already known to be valid, without validating them again.

For the two places that make a model per row of a large line: an Arrow snapshot's rows, whose
every rule was checked column-wise (models.arrow.decode), and a tick's result, whose values
the engine made (solver.placement.decode). And `collections_deferred`, for blocks that make
many objects and no cycles worth collecting: a tick, an explanation, an Arrow build, and the
server's decodes of a tick's result and forecasts, which validate many models that live on.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from itertools import repeat
from types import GetSetDescriptorType, MemberDescriptorType
from typing import Any, TypeVar

from pydantic import BaseModel

from models.errors import InternalError

M = TypeVar("M", bound=BaseModel)


def _slot_setter(name: str) -> Callable[[object, object], None]:
    """The setter of one of BaseModel's slots (`__dict__` among them).

    BaseModel keeps these in slots; setting them through their descriptors is the cheapest way
    (object.__setattr__ looks the descriptor up at every call, a fifth of what trusted_models
    once cost per row).
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

    The models are made first, then each slot is set on all of them by a setter mapped over
    them in C: the rows' dicts (one comprehension) are the only Python bytecode per row, a
    fifth cheaper than a loop setting each model's slots.
    """
    if columns.keys() != cls.model_fields.keys():
        raise InternalError(
            f"{builder} builds {cls.__name__} from {sorted(columns)},"
            f" but the model has {sorted(cls.model_fields)}"
        )
    if len({len(column) for column in columns.values()}) > 1:
        raise InternalError(f"{builder} builds {cls.__name__} from columns of unequal lengths")
    rows = len(next(iter(columns.values()), ()))
    models: list[M] = list(map(object.__new__, repeat(cls, rows)))
    fields_set = set(columns)
    for set_slot, values in (
        (_SET_DICT, _row_dicts(tuple(columns))(columns.values())),
        (_SET_FIELDS_SET, repeat(fields_set)),
        (_SET_EXTRA, repeat(None)),
        (_SET_PRIVATE, repeat(None)),
    ):
        deque(map(set_slot, models, values), maxlen=0)  # run to the end, keeping nothing
    return models


@cache
def _row_dicts(names: tuple[str, ...]) -> Callable[[Iterable[Sequence[Any]]], list[dict[str, Any]]]:
    """A function of one column per name returning each row's dict {name: value}.

    A comprehension over the zipped columns with a dict display of constant keys, which
    CPython builds in one step: no Python call and no dict(zip(...)) per row (per row of 13
    fields, 40% cheaper than dict(zip(names, row)), and 12% cheaper than calling a function
    of the row's values). The names are a model's field names (identifiers), quoted with repr.
    """
    values = [f"v{i}" for i in range(len(names))]
    entries = ", ".join(f"{name!r}: {value}" for name, value in zip(names, values, strict=True))
    function: Callable[[Iterable[Sequence[Any]]], list[dict[str, Any]]] = eval(
        f"lambda columns: [{{{entries}}} for {', '.join(values)}, in zip(*columns)]"
    )
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
