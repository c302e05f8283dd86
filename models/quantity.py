"""Kubernetes resource quantities, parsed once into integers.

CPU is held in millicores, every other resource (memory, ephemeral-storage,
named extended resources) in its base unit (bytes for memory). A quantity that
would need a fraction of the integer unit is rejected rather than rounded, so a
cap and the requests it limits are always compared exactly.
"""

from __future__ import annotations

import re
from decimal import Decimal

from models.errors import InvalidInput
from models.limits import MAX_AMOUNT, MAX_CPU_MILLICORES, MAX_SPELLING

CPU = "cpu"
MEMORY = "memory"

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(
    r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?"
    r"\s*(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?\s*$"
)
# A spelling has at most MAX_SPELLING characters, so a larger exponent than this makes any
# non-zero number out of range (or a fraction below one unit) before Decimal has to hold it.
_LARGEST_EXPONENT = 2 * MAX_SPELLING
_BINARY = [("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]
_DECIMAL = [("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)]


def largest_amount(resource: str) -> int:
    """The most one container may request, or one node offer, of `resource` (models.limits)."""
    return MAX_CPU_MILLICORES if resource == CPU else MAX_AMOUNT


def parse_quantity(
    resource: str, value: str | int | float, field: str, most: int | None = None
) -> int:
    """Parse `value` for `resource` into integer units (millicores for cpu).

    `field` names where the value came from, for the error message; `most` is the
    largest amount accepted, by default `largest_amount(resource)`.
    """
    if isinstance(value, bool):
        raise InvalidInput(f"{field}: {value!r} is not a quantity")
    text = str(value)
    match = _QUANTITY.match(text) if len(text) <= MAX_SPELLING else None
    if match is None:
        shown = text if len(text) <= MAX_SPELLING else text[:MAX_SPELLING] + "..."
        raise InvalidInput(
            f"{field}: {shown!r} is not a Kubernetes quantity (examples: 500m, 2, 64Gi, 1G)"
        )
    number, exponent, suffix = match.group(1), match.group(2), match.group(3) or ""
    most = largest_amount(resource) if most is None else most
    amount = Decimal(number) * _SUFFIXES[suffix]
    if exponent is not None:
        power = int(exponent)
        if amount and power > _LARGEST_EXPONENT:
            raise _above(field, text, resource, most)
        amount *= Decimal(10) ** max(power, -_LARGEST_EXPONENT)
    if resource == CPU:
        amount *= 1000
    if amount != amount.to_integral_value():
        unit = "millicore" if resource == CPU else "unit"
        raise InvalidInput(f"{field}: {text!r} is not a whole number of {unit}s")
    if amount < 0:
        raise InvalidInput(f"{field}: {text!r} is negative")
    if amount > most:
        raise _above(field, text, resource, most)
    return int(amount)


def _above(field: str, text: str, resource: str, most: int) -> InvalidInput:
    unit = " cores" if resource == CPU else ""
    return InvalidInput(
        f"{field}: {text!r} is above the limit of {format_quantity(resource, most)}{unit}",
        field=field,
    )


def format_quantity(resource: str, amount: int) -> str:
    """The shortest exact Kubernetes spelling of `amount` units of `resource`."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount == 0:
        return "0"
    suffixes = _BINARY if resource == MEMORY else []
    for suffix, size in [*suffixes, *_DECIMAL]:
        if amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)
