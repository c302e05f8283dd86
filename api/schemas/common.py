"""What every request and response body of the HTTP API builds on.

Requests take what people write (`"4Ti"`, `"H100:1"`, `"1h"`) and are turned
into domain models (models.snapshot, models.quota) once, in `to_*` methods, through
`to_domain`; responses are built from store records and the last tick's metrics.
One module per resource family holds its bodies, cut as api/routes is.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from api.errors import invalid_from_validation
from api.store.records import ReportedOutcome
from models.errors import ErrorCode, InvalidInput
from models.snapshot import Strict

M = TypeVar("M", bound=BaseModel)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, examples=["research"])]


def _no_true_or_false(value: Any) -> Any:
    """`true`/`false` as a quantity or count: pydantic's lax mode would read them as 1 and 0
    before the domain model's parser could refuse them (found by the schemathesis run)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, bool):
                raise InvalidInput(f"{key}: true/false where a value is expected", field=key)
    return value


Quantities = Annotated[
    dict[str, str | int],
    BeforeValidator(_no_true_or_false),
    Field(
        description="resource -> Kubernetes quantity", examples=[{"cpu": "512", "memory": "4Ti"}]
    ),
]
DeviceCounts = Annotated[
    dict[str, int],
    BeforeValidator(_no_true_or_false),
    Field(description="device (H100, nvidia-t4, A100/1g.5gb) -> count", examples=[{"H100": 48}]),
]


class Body(Strict):
    """A request body; an unknown field is refused, so a misspelt one is not silently dropped,
    and true/false is no number (see Strict)."""


def to_domain(model: type[M], data: dict[str, Any], where: tuple[str | int, ...]) -> M:
    """Validate `data` into a domain model; errors name the field under `where`."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = [{**p, "loc": (*where, *p["loc"])} for p in error.errors()]
        raise invalid_from_validation(problems) from None


class ExecutorReport(Body):
    """What an executor says happened to a scheduled action."""

    outcome: Literal[ReportedOutcome.STARTED, ReportedOutcome.SUCCEEDED, ReportedOutcome.FAILED] = (
        Field(description="What happened: started, succeeded or failed.")
    )
    code: ErrorCode | None = Field(default=None, description="for failed: the failure's code")
    message: str | None = Field(default=None, description="For failed: what went wrong, in words.")


class JobReport(ExecutorReport):
    """What an executor says happened to a job holding instances: `starting` while it starts
    the job's containers (the job is STARTING), then `started`, `succeeded` or `failed`."""

    outcome: ReportedOutcome = Field(  # type: ignore[assignment]  # a job's life has one more step
        description="What happened: starting, started, succeeded or failed."
    )
