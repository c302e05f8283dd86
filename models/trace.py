"""One action of a replay trace, as the boundary reads it (models.arrow.trace reads files).

A row carries one container shape, repeated `containers` times, in the scenario files'
spellings; `action()` turns it into the engine's queued Action at its submission time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from models.devices import parse_accelerator_request
from models.errors import InvalidInput
from models.fields import Timestamp
from models.limits import MAX_DURATION, MAX_EXPECTED_DURATION, MAX_REPLICAS, MAX_SPELLING
from models.quantity import parse_quantity
from models.snapshot import Action, Container, Strict

MAX_TRACE_ROWS = 1_000_000
"""Actions in one trace: a day of the Alibaba openb trace is about 8,000."""
MAX_TRACE_NAME = 253
"""Characters of an id, queue or environment name (a Kubernetes object name's limit)."""
MAX_TRACE_SECONDS = MAX_DURATION.total_seconds()

Name = Annotated[str, Field(min_length=1, max_length=MAX_TRACE_NAME)]
Seconds = Annotated[float, Field(ge=0, le=MAX_TRACE_SECONDS, allow_inf_nan=False)]
ExpectedSeconds = Annotated[
    float, Field(gt=0, le=MAX_EXPECTED_DURATION.total_seconds(), allow_inf_nan=False)
]


class TraceRow(Strict):
    id: Name
    queue: Name
    submit_s: Seconds | None = None
    submitted_at: Timestamp | None = None
    duration_s: Seconds
    containers: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)
    cpu: str | None = Field(default=None, max_length=MAX_SPELLING)
    memory: str | None = Field(default=None, max_length=MAX_SPELLING)
    gpu: str | None = Field(default=None, max_length=MAX_SPELLING)
    environment: Name | None = None
    max_queued_time_s: Seconds | None = None
    deadline_s: Seconds | None = None
    expected_duration_s: ExpectedSeconds | None = None  # the submitter's estimate

    @field_validator("cpu", "memory", "gpu")
    @classmethod
    def _spelled(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Checked here, so a bad spelling is reported with its row; kept as written."""
        if value is not None:
            name = str(info.field_name)
            if name == "gpu":
                parse_accelerator_request(value, name)
            else:
                parse_quantity(name, value, name)
        return value

    @model_validator(mode="after")
    def _one_submit_form(self) -> Self:
        if (self.submit_s is None) == (self.submitted_at is None):
            raise InvalidInput("give exactly one of submit_s and submitted_at", field="submit_s")
        if self.environment is not None and (self.cpu or self.memory or self.gpu):
            raise InvalidInput("an action in an environment has no requests", field="environment")
        return self

    def submitted(self, start: datetime) -> datetime:
        if self.submitted_at is not None:
            return self.submitted_at
        return start + timedelta(seconds=self.submit_s or 0.0)

    def action(self, start: datetime) -> Action:
        """The queued action this row submits; the trace start dates `submit_s`."""
        resources = {
            name: value for name, value in (("cpu", self.cpu), ("memory", self.memory)) if value
        }
        containers = (
            []
            if self.environment is not None
            else [
                Container.model_validate(
                    {"name": f"c{index}", "resources": resources, "gpu": self.gpu}
                )
                for index in range(self.containers or 1)
            ]
        )
        return Action(
            id=self.id,
            queue=self.queue,
            submitted_at=self.submitted(start),
            containers=containers,
            environment=self.environment,
            max_queued_time=(
                None
                if self.max_queued_time_s is None
                else timedelta(seconds=self.max_queued_time_s)
            ),
            deadline=None if self.deadline_s is None else timedelta(seconds=self.deadline_s),
            expected_duration=(
                None
                if self.expected_duration_s is None
                else timedelta(seconds=self.expected_duration_s)
            ),
        )


def check_trace_rows(source: str, rows: list[TraceRow]) -> None:
    """Across rows: unique ids, and one form of submit time for the whole trace."""
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if row.id in seen:
            raise InvalidInput(f"{source}: row {index}, column id: {row.id!r} again", field="id")
        seen.add(row.id)
        if (row.submit_s is None) != (rows[0].submit_s is None):
            raise InvalidInput(
                f"{source}: row {index}, column submit_s: row 0 uses the other form of submit time"
                " (submit_s or submitted_at); use one form for the whole trace",
                field="submit_s",
            )
