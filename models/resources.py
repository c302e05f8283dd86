"""Quantities by canonical resource name: one vector for what work asks, holds and is capped at.

A key is one of
- `cpu` (millicores), `memory` (bytes), or any other named resource in its base unit;
- `gpu`: untyped NVIDIA GPU requests (`gpu=2`, any whole NVIDIA GPU);
- a canonical device name (`nvidia_gpu/nvidia-h100`, `nvidia_gpu/nvidia-a100/1g.5gb`): typed
  accelerators.
Amounts are integers. A queue's caps use the same keys (see models.snapshot.Queue.caps), so a
demand, a queue's usage and its caps are compared entry by entry.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from enum import IntEnum
from typing import TypeVar, overload

from models.devices import AMD_GPU, GOOGLE_TPU, NVIDIA_GPU
from models.quantity import format_quantity

UNTYPED_GPU = "gpu"
"""The key of untyped NVIDIA GPU requests (the cap `max_gpus`)."""

T = TypeVar("T")
_DEVICE_PREFIXES = tuple(kind + "/" for kind in (NVIDIA_GPU, GOOGLE_TPU, AMD_GPU))


class ResourceKind(IntEnum):
    """What a key counts; reports list named resources first, then devices, then untyped GPUs."""

    NAMED = 0
    DEVICE = 1
    UNTYPED_GPU = 2


def kind_of(name: str) -> ResourceKind:
    if name == UNTYPED_GPU:
        return ResourceKind.UNTYPED_GPU
    if name.startswith(_DEVICE_PREFIXES):
        return ResourceKind.DEVICE
    return ResourceKind.NAMED


def spelled(name: str, amount: int) -> str:
    """An amount as a message writes it: a quantity (`64Gi`) of a named resource, else a count."""
    return format_quantity(name, amount) if kind_of(name) is ResourceKind.NAMED else str(amount)


def caps_of(
    named: Mapping[str, int], devices: Mapping[str, int], untyped_gpus: int | None
) -> ResourceVector:
    """One vector of a queue's caps: max_resources, max_accelerators, max_gpus as `gpu`."""
    caps = {**named, **devices}
    if untyped_gpus is not None:
        caps[UNTYPED_GPU] = untyped_gpus
    return ResourceVector(caps)


class ResourceVector(Mapping[str, int]):
    """Immutable integer amounts by canonical resource name; `amount` reads a missing one as 0.

    Entries keep the order they were added in: a demand lists its named resources, then its
    devices, then its untyped GPUs, and the first cap it breaks is reported in that order.
    """

    __slots__ = ("_amounts",)

    def __init__(self, amounts: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        self._amounts: dict[str, int] = dict(amounts)

    def __getitem__(self, name: str) -> int:
        return self._amounts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)

    # The dict's own lookups and views: Mapping's defaults go through __getitem__ and, for a
    # missing key, an exception, which the tick's hot loops cannot afford.
    def __contains__(self, name: object) -> bool:
        return name in self._amounts

    @overload
    def get(self, name: str, /) -> int | None: ...
    @overload
    def get(self, name: str, /, default: int | T) -> int | T: ...
    def get(self, name: str, /, default: int | T | None = None) -> int | T | None:
        return self._amounts.get(name, default)

    def keys(self) -> KeysView[str]:
        return self._amounts.keys()

    def items(self) -> ItemsView[str, int]:
        return self._amounts.items()

    def values(self) -> ValuesView[int]:
        return self._amounts.values()

    def __hash__(self) -> int:
        return hash(frozenset(self._amounts.items()))

    def __repr__(self) -> str:
        return f"ResourceVector({self._amounts!r})"

    def amount(self, name: str) -> int:
        return self._amounts.get(name, 0)

    def __add__(self, other: Mapping[str, int]) -> ResourceVector:
        amounts = dict(self._amounts)
        for name, amount in other.items():
            amounts[name] = amounts.get(name, 0) + amount
        return ResourceVector(amounts)

    def plus(self, name: str, amount: int) -> ResourceVector:
        """This vector with `amount` more (a negative amount: less) of `name`."""
        amounts = dict(self._amounts)
        amounts[name] = amounts.get(name, 0) + amount
        return ResourceVector(amounts)

    def over(self, held: ResourceVector, caps: ResourceVector) -> Iterator[tuple[str, int, int]]:
        """(name, amount, cap) for each entry of this demand that takes `held` past its cap.

        Zero amounts never break a cap, not even one that usage is already over.
        """
        cap_of, held_of = caps._amounts.get, held._amounts.get
        for name, amount in self._amounts.items():
            if amount:
                cap = cap_of(name)
                if cap is not None and held_of(name, 0) + amount > cap:
                    yield name, amount, cap

    def accelerators(self) -> int:
        """GPUs and other accelerators, typed or untyped."""
        named = ResourceKind.NAMED
        return sum(a for name, a in self._amounts.items() if kind_of(name) is not named)

    def of_kind(self, kind: ResourceKind) -> dict[str, int]:
        """The entries of one kind, in the order they were added."""
        return {name: a for name, a in self._amounts.items() if kind_of(name) is kind}

    def reported(self) -> ResourceVector:
        """The entries as reports list them: named resources, devices, untyped GPUs, by name."""
        return ResourceVector(
            sorted(self._amounts.items(), key=lambda entry: (kind_of(entry[0]), entry[0]))
        )


EMPTY = ResourceVector()
