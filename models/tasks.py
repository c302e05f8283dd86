"""Task templates and the routing of an action to its queue.

A task template is a stored action shape (containers, or a reusable environment) with an
optional queue, and the queue of the task environment it was declared in (the seed's
`TaskEnvironment(name, queue=...)`; a reusable environment's own queue when it runs in one).

A submission names its queue, or inherits one: the most specific level that sets a queue
wins, invocation > run > task > environment, and work nothing routes goes
to the default queue (`resolve_queue`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import Field, model_validator

from models.errors import InvalidInput
from models.fields import Duration
from models.snapshot import DEFAULT_QUEUE, Container, Strict


class QueueSource(StrEnum):
    """Which level set an action's queue, most specific first."""

    INVOCATION = "invocation"  # the submission named it
    RUN = "run"  # the run was created with it
    TASK = "task"  # the task template's queue
    ENVIRONMENT = "environment"  # the reusable environment's queue
    DEFAULT = "default"  # nothing routed it


class TaskTemplate(Strict):
    """What a submission of the task gets unless it says otherwise."""

    name: str = Field(min_length=1, description="The task's name.")
    containers: list[Container] = Field(
        default_factory=list,
        description="Containers its submissions get (none with `environment`).",
    )
    environment: str | None = Field(
        default=None, description="The reusable environment its submissions run in, by name."
    )
    queue: str | None = Field(
        default=None,
        description="The queue its submissions go to unless their run or invocation names another.",
    )
    environment_queue: str | None = Field(
        default=None,
        description="The queue of the task environment it belongs to (not with `environment`).",
    )
    max_queued_time: Duration | None = Field(
        default=None,
        description="How long its submissions may wait before they fail MAX_QUEUED_TIME_EXCEEDED.",
    )

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if (self.environment is None) == (not self.containers):
            raise InvalidInput(
                f"task {self.name}: needs containers or an environment, not both",
                field="containers",
            )
        if self.environment is not None and self.environment_queue is not None:
            raise InvalidInput(
                f"task {self.name}: a reusable environment's queue is its own, so it takes no"
                " environment_queue",
                field="environment_queue",
            )
        return self

    @property
    def queues(self) -> list[str]:
        """The queues it names itself (rights on them are needed to store it)."""
        return [q for q in (self.queue, self.environment_queue) if q is not None]


def resolve_queue(
    run: str | None, task: str | None, environment: str | None
) -> tuple[str, QueueSource]:
    """The queue of a submission that names none (the invocation level, which wins over
    these): that of the most specific level that sets one, and that level."""
    levels = (
        (run, QueueSource.RUN),
        (task, QueueSource.TASK),
        (environment, QueueSource.ENVIRONMENT),
    )
    for queue, source in levels:
        if queue is not None:
            return queue, source
    return DEFAULT_QUEUE, QueueSource.DEFAULT
