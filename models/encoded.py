"""Many models kept as their JSON, by key, each decoded only when it is read.

For what a process keeps of a tick's many entries but reads a few of at a time: the API
server's waiting actions of the last tick and their start forecasts. The worker that made
them dumps each one; the server keeps the bytes it received and makes no model, and no object
the garbage collector walks, per entry. Decoding 10,000 of them held the server's GIL for
about 80 ms a tick, which requests then waited (docs/benchmarks.md#service); a read decodes
the one it shows, in a few microseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def encode(model: BaseModel) -> bytes:
    """The model's JSON, as `model_dump_json` makes it, in bytes (no copy through str)."""
    return model.__pydantic_serializer__.to_json(model)


class EncodedModels(Mapping[str, M], Generic[M]):
    """Models of one class by key, held as their JSON (`encoded`)."""

    __slots__ = ("encoded", "model")

    def __init__(self, model: type[M], encoded: dict[str, bytes]) -> None:
        self.model = model
        self.encoded = encoded

    @classmethod
    def of(cls, model: type[M], entries: Iterable[tuple[str, M]]) -> EncodedModels[M]:
        return cls(model, {key: encode(value) for key, value in entries})

    def __getitem__(self, key: str) -> M:
        return self.model.model_validate_json(self.encoded[key])

    def __contains__(self, key: object) -> bool:  # Mapping's would decode the entry
        return key in self.encoded

    def __iter__(self) -> Iterator[str]:
        return iter(self.encoded)

    def __len__(self) -> int:
        return len(self.encoded)
