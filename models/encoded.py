"""Many models kept as their JSON, by key, each decoded only when it is read.

For what a process keeps of a tick's many entries but reads a few of at a time: the API
server's waiting actions of the last tick and their start forecasts. The worker that made
them dumps each one; the server keeps the bytes it received and makes no model, and no object
the garbage collector walks, per entry. Decoding 10,000 of them held the server's GIL for
about 80 ms a tick, which requests then waited (docs/benchmarks.md#service); a read decodes
the one it shows, in a few microseconds.

Pickled (the worker's answer to the server), the entries travel as one block of bytes and
their keys as one JSON array: unpickling a dict of 10,000 bytes held the server's GIL for
about 3.5 ms, twice a tick (the waiting actions, then their forecasts); the block takes 0.1 ms,
and the keys are indexed only when an entry is first looked up (about 1 ms, once a tick).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator, Mapping
from itertools import accumulate
from typing import Generic, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def encode(model: BaseModel) -> bytes:
    """The model's JSON, as `model_dump_json` makes it, in bytes (no copy through str)."""
    return model.__pydantic_serializer__.to_json(model)


class EncodedModels(Mapping[str, M], Generic[M]):
    """Models of one class by key, held as their JSON (`encoded`)."""

    __slots__ = ("_block", "_encoded", "_ends", "_index", "_keys", "model")

    def __init__(self, model: type[M], encoded: dict[str, bytes]) -> None:
        self.model = model
        self._encoded: dict[str, bytes] | None = encoded
        # Unpickled: every entry end to end, where each ends, and the keys in that order
        # (as JSON until first read); `_index` finds a key's entry.
        self._block = b""
        self._ends = array("q")
        self._keys: str | list[str] = []
        self._index: dict[str, int] | None = None

    @classmethod
    def of(cls, model: type[M], entries: Iterable[tuple[str, M]]) -> EncodedModels[M]:
        return cls(model, {key: encode(value) for key, value in entries})

    @property
    def encoded(self) -> dict[str, bytes]:
        """Each entry's JSON by key (made whole again from the block, once, if unpickled)."""
        if self._encoded is None:
            index = self._indexed()
            self._encoded = {key: self._entry(i) for key, i in index.items()}
        return self._encoded

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        encoded = self.encoded
        ends = array("q", accumulate(len(entry) for entry in encoded.values()))
        block = b"".join(encoded.values())
        return _unpickled, (self.model, json.dumps(list(encoded)), block, ends.tobytes())

    def _indexed(self) -> dict[str, int]:
        index = self._index
        if index is None:
            keys = self._keys
            if isinstance(keys, str):
                keys = self._keys = json.loads(keys)
            index = self._index = {key: i for i, key in enumerate(keys)}
        return index

    def _entry(self, i: int) -> bytes:
        return self._block[self._ends[i - 1] if i else 0 : self._ends[i]]

    def __getitem__(self, key: str) -> M:
        if self._encoded is not None:
            return self.model.model_validate_json(self._encoded[key])
        return self.model.model_validate_json(self._entry(self._indexed()[key]))

    def __contains__(self, key: object) -> bool:  # Mapping's would decode the entry
        if self._encoded is not None:
            return key in self._encoded
        return key in self._indexed()

    def __iter__(self) -> Iterator[str]:
        return iter(self._encoded if self._encoded is not None else self._indexed())

    def __len__(self) -> int:
        return len(self._encoded if self._encoded is not None else self._ends)


def _unpickled(model: type[M], keys: str, block: bytes, ends: bytes) -> EncodedModels[M]:
    """The mapping `EncodedModels.__reduce__` packed, left packed until it is read."""
    models: EncodedModels[M] = EncodedModels(model, {})
    models._encoded = None
    models._keys, models._block = keys, block
    models._ends.frombytes(ends)
    return models
