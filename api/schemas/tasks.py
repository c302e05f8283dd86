"""Bodies of the task templates' API (api.routes.tasks)."""

from __future__ import annotations

from pydantic import Field

from api.schemas.actions import ContainerIn
from api.schemas.common import Body, Name, to_domain
from models.tasks import TaskTemplate


class TaskCreate(Body):
    """A task template: containers, or a reusable environment, and an optional queue that
    its submissions go to unless their run or invocation names another."""

    name: Name = Field(description="The task's name.")
    containers: list[ContainerIn] = Field(
        default_factory=list,
        description="Containers its submissions get (none with `environment`).",
    )
    environment: str | None = Field(default=None, description="a reusable environment's name")
    queue: str | None = Field(
        default=None,
        description="The queue its submissions go to unless their run or invocation names another.",
    )
    environment_queue: str | None = Field(
        default=None,
        description="the queue of the task environment it belongs to (without `environment`)",
    )
    max_queued_time: str | float | None = Field(
        default=None,
        examples=["1h"],
        description="How long its submissions may wait before they fail"
        " MAX_QUEUED_TIME_EXCEEDED (`1h`, or seconds).",
    )

    def to_task(self) -> TaskTemplate:
        return to_domain(TaskTemplate, self.model_dump(exclude_none=True), ())


class TaskPublic(TaskTemplate):
    """A stored task template."""

    @classmethod
    def of(cls, task: TaskTemplate) -> TaskPublic:
        return cls.model_validate(task.model_dump())
