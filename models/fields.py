"""Pydantic field types that parse user spellings once at the boundary.

Each type validates from what people write (`"4Ti"`, `"H100"`, `"1h30m"`) into
the integer or canonical form the solver uses, and serializes back to a
spelling that validates to the same value, so a scenario survives a round trip.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, ValidationInfo

from models.devices import AcceleratorRequest, parse_accelerator_request, parse_device
from models.errors import InvalidInput
from models.quantity import format_quantity, parse_quantity


def _field_name(info: ValidationInfo) -> str:
    return info.field_name or "value"


def _parse_resource_map(value: Any, info: ValidationInfo) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{_field_name(info)}: expected a mapping of resource to quantity")
    parsed: dict[str, int] = {}
    for name, quantity in value.items():
        resource = str(name).strip().lower()
        if not resource:
            raise InvalidInput(f"{_field_name(info)}: empty resource name")
        parsed[resource] = parse_quantity(resource, quantity, f"{_field_name(info)}.{resource}")
    return parsed


def _format_resource_map(value: dict[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in value.items()}


ResourceMap = Annotated[
    dict[str, int],
    BeforeValidator(_parse_resource_map),
    PlainSerializer(_format_resource_map, return_type=dict[str, str]),
]
"""cpu in millicores, everything else in base units; only the named resources are present."""


def quantity_of(resource: str) -> Any:
    """One quantity of `resource` (a node's cpu, say), parsed like a ResourceMap entry."""
    return Annotated[
        int,
        BeforeValidator(lambda value, info: parse_quantity(resource, value, _field_name(info))),
        PlainSerializer(lambda amount: format_quantity(resource, amount), return_type=str),
    ]


def _parse_accelerator_caps(value: Any, info: ValidationInfo) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{_field_name(info)}: expected a mapping of device to count")
    caps: dict[str, int] = {}
    for name, count in value.items():
        field = f"{_field_name(info)}.{name}"
        device = parse_device(str(name), field)
        if isinstance(count, bool) or not isinstance(count, int | str) or not str(count).isdigit():
            raise InvalidInput(f"{field}: {count!r} is not a whole number of devices")
        caps[device.canonical] = int(count)
    return caps


AcceleratorCaps = Annotated[dict[str, int], BeforeValidator(_parse_accelerator_caps)]
"""Canonical device name (with partition) to the most devices of that type."""


def _parse_device_name(value: Any, info: ValidationInfo) -> str | None:
    if value is None or value == "":
        return None
    return parse_device(str(value), _field_name(info)).canonical


DeviceName = Annotated[str | None, BeforeValidator(_parse_device_name)]


def _parse_gpu(value: Any, info: ValidationInfo) -> AcceleratorRequest | None:
    if value is None or isinstance(value, AcceleratorRequest):
        return value
    return parse_accelerator_request(value, _field_name(info))


def _format_gpu(value: AcceleratorRequest | None) -> str | int | None:
    if value is None:
        return None
    return f"{value.device.canonical}:{value.count}" if value.device else value.count


GpuRequest = Annotated[
    AcceleratorRequest | None,
    BeforeValidator(_parse_gpu),
    PlainSerializer(_format_gpu, return_type=str | int | None),
]

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(value: Any, field: str = "duration") -> timedelta:
    """`90s`, `30m`, `1h30m`, `2d`, ISO 8601 (`PT1H`) or a number of seconds."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    text = str(value).strip()
    match = _DURATION.match(text)
    if text and match and any(match.groups()):
        days, hours, minutes, seconds = match.groups()
        return timedelta(
            days=int(days or 0),
            hours=int(hours or 0),
            minutes=int(minutes or 0),
            seconds=float(seconds or 0),
        )
    iso = re.match(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", text)
    if iso and any(iso.groups()):
        days, hours, minutes, seconds = iso.groups()
        return timedelta(
            days=int(days or 0),
            hours=int(hours or 0),
            minutes=int(minutes or 0),
            seconds=float(seconds or 0),
        )
    raise InvalidInput(f"{field}: {text!r} is not a duration (examples: 90s, 30m, 1h30m)")


def format_duration(value: timedelta) -> str:
    seconds = value.total_seconds()
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, whole = divmod(rest, 60)
    fraction = seconds - int(seconds)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    if whole or fraction or not parts:
        parts.append(f"{whole + fraction:g}s")
    return "".join(parts)


Duration = Annotated[
    timedelta,
    BeforeValidator(lambda value, info: parse_duration(value, _field_name(info))),
    PlainSerializer(format_duration, return_type=str),
]


def _aware(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    if isinstance(value, str) and value.strip():
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return value


def _format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


Timestamp = Annotated[
    datetime,
    BeforeValidator(_aware),
    PlainSerializer(_format_timestamp, return_type=str),
]
"""A point in time; a time without a zone is read as UTC."""

CpuQuantity = quantity_of("cpu")
MemoryQuantity = quantity_of("memory")
