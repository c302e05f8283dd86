"""Pydantic field types that parse user spellings once at the boundary.

Each type validates from what people write (`"4Ti"`, `"H100"`, `"1h30m"`) into
the integer or canonical form the solver uses, and serializes back to a
spelling that validates to the same value, so a scenario survives a round trip.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    PlainSerializer,
    ValidationInfo,
    WithJsonSchema,
)

from models.devices import AcceleratorRequest, parse_accelerator_request, parse_device
from models.errors import InvalidInput
from models.limits import EARLIEST, LATEST, MAX_CAP, MAX_DURATION, MAX_SPELLING
from models.quantity import format_quantity, parse_quantity


def _field_name(info: ValidationInfo) -> str:
    return info.field_name or "value"


def _resource_map(most: int | None) -> Any:
    """A validator of a mapping of resource to quantity, each at most `most` (None: the
    per-container limit of its resource, models.quantity.largest_amount)."""

    def parse(value: Any, info: ValidationInfo) -> dict[str, int]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise InvalidInput(f"{_field_name(info)}: expected a mapping of resource to quantity")
        parsed: dict[str, int] = {}
        for name, quantity in value.items():
            resource = str(name).strip().lower()
            if not resource:
                raise InvalidInput(f"{_field_name(info)}: empty resource name")
            where = f"{_field_name(info)}.{resource}"
            parsed[resource] = parse_quantity(resource, quantity, where, most)
        return parsed

    return BeforeValidator(parse)


QUANTITY_INPUT: dict[str, Any] = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
"""What a quantity is given as (`"64Gi"`, `8`), for the HTTP API's document."""
RESOURCE_MAP_INPUT = WithJsonSchema(
    {"anyOf": [{"type": "object", "additionalProperties": QUANTITY_INPUT}, {"type": "null"}]},
    mode="validation",
)
"""A resource map as given: quantities by resource, or null for none (as YAML writes an empty
key); the solver units are what a response holds."""


def _format_resource_map(value: dict[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in value.items()}


ResourceMap = Annotated[
    dict[str, int],
    _resource_map(None),
    RESOURCE_MAP_INPUT,
    PlainSerializer(_format_resource_map, return_type=dict[str, str]),
]
"""What one container requests or one node offers: cpu in millicores, everything else in base
units; only the named resources are present."""

ResourceCaps = Annotated[
    dict[str, int],
    _resource_map(MAX_CAP),
    RESOURCE_MAP_INPUT,
    PlainSerializer(_format_resource_map, return_type=dict[str, str]),
]
"""A queue's caps, in the units of ResourceMap; a cap may exceed what one container asks for."""


def quantity_of(resource: str) -> Any:
    """One quantity of `resource` (a node's cpu, say), parsed like a ResourceMap entry."""
    return Annotated[
        int,
        BeforeValidator(lambda value, info: parse_quantity(resource, value, _field_name(info))),
        WithJsonSchema(QUANTITY_INPUT, mode="validation"),
        PlainSerializer(lambda amount: format_quantity(resource, amount), return_type=str),
    ]


def parse_count(value: Any, field: str, most: int, what: str) -> int:
    """A whole number 0..most, given as an integer or its decimal spelling."""
    text = str(value).strip() if isinstance(value, int | str) else ""
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()):
        raise InvalidInput(f"{field}: {value!r} is not a whole number of {what}", field=field)
    if len(text) > MAX_SPELLING or int(text) > most:
        shown = text if len(text) <= MAX_SPELLING else text[:MAX_SPELLING] + "..."
        raise InvalidInput(f"{field}: {shown} is above the limit of {most:,} {what}", field=field)
    return int(text)


def _parse_accelerator_caps(value: Any, info: ValidationInfo) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{_field_name(info)}: expected a mapping of device to count")
    caps: dict[str, int] = {}
    for name, count in value.items():
        field = f"{_field_name(info)}.{name}"
        device = parse_device(str(name), field)
        caps[device.canonical] = parse_count(count, field, MAX_CAP, "devices")
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
_ISO_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration(value: Any, field: str = "duration") -> timedelta:
    """`90s`, `30m`, `1h30m`, `2d`, ISO 8601 (`PT1H`) or a number of seconds, 0 to
    models.limits.MAX_DURATION."""
    if isinstance(value, timedelta):
        parts = (0.0, 0.0, 0.0, value.total_seconds())
    elif isinstance(value, int | float) and not isinstance(value, bool):
        parts = (0.0, 0.0, 0.0, float(value))
        if not math.isfinite(parts[3]):
            raise InvalidInput(f"{field}: {value!r} is not a number of seconds", field=field)
    else:
        parts = _duration_parts(str(value).strip(), field)
    days, hours, minutes, seconds = parts
    if seconds < 0:
        raise InvalidInput(f"{field}: {value!r} is negative", field=field)
    if ((days * 24 + hours) * 60 + minutes) * 60 + seconds > MAX_DURATION.total_seconds():
        raise InvalidInput(
            f"{field}: {value!r} is above the limit of {format_duration(MAX_DURATION)}",
            field=field,
        )
    if isinstance(value, timedelta):
        return value
    return timedelta(days=int(days), hours=int(hours), minutes=int(minutes), seconds=seconds)


def _duration_parts(text: str, field: str) -> tuple[float, float, float, float]:
    """Days, hours, minutes and seconds of a spelling (whole numbers but the seconds)."""
    short = len(text) <= MAX_SPELLING
    match = (_DURATION.match(text) or _ISO_DURATION.match(text)) if short else None
    if not text or match is None or not any(match.groups()):
        shown = text if short else text[:MAX_SPELLING] + "..."
        raise InvalidInput(f"{field}: {shown!r} is not a duration (examples: 90s, 30m, 1h30m)")
    days, hours, minutes, seconds = (float(part or 0) for part in match.groups())
    return days, hours, minutes, seconds


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


def _in_range(value: datetime, info: ValidationInfo) -> datetime:
    if not EARLIEST <= value <= LATEST:
        field = _field_name(info)
        raise InvalidInput(
            f"{field}: {_format_timestamp(value)} is outside"
            f" {_format_timestamp(EARLIEST)} .. {_format_timestamp(LATEST)}",
            field=field,
        )
    return value


def _format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


Timestamp = Annotated[
    datetime,
    BeforeValidator(_aware),
    AfterValidator(_in_range),
    PlainSerializer(_format_timestamp, return_type=str),
]
"""A point in time, within models.limits.EARLIEST..LATEST; a time without a zone is UTC."""


def _parse_deadline(value: Any, info: ValidationInfo) -> datetime | timedelta:
    """A time (ISO 8601, a datetime) or a duration from submission (a spelling, a number of
    seconds); one parse, so an error names the field once and says what was expected."""
    field = _field_name(info)
    text = value.strip() if isinstance(value, str) else None
    if text is not None and not (_DURATION.match(text) or _ISO_DURATION.match(text)):
        try:
            value = _aware(text)
        except ValueError:
            raise InvalidInput(
                f"{field}: {text!r} is neither a time (2026-01-01T12:00:00Z)"
                " nor a duration (6h, 1h30m)",
                field=field,
            ) from None
    if isinstance(value, datetime):
        return _in_range(_aware(value), info)
    return parse_duration(value, field)


def _format_deadline(value: datetime | timedelta) -> str:
    return _format_timestamp(value) if isinstance(value, datetime) else format_duration(value)


Deadline = Annotated[
    datetime | timedelta,
    BeforeValidator(_parse_deadline),
    PlainSerializer(_format_deadline, return_type=str),
]
"""A point in time (as Timestamp) or a duration from submission (as Duration)."""

CpuQuantity = quantity_of("cpu")
MemoryQuantity = quantity_of("memory")
