"""Bodies of the actions' API (api.routes.actions): submissions and an action with its life."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from api.schemas.common import Body, Name, Quantities, to_domain
from api.store.records import ActionRecord, Phase
from models.errors import ErrorCode
from models.explanation import Explanation
from models.fields import Duration, Timestamp
from models.forecast import StartForecast
from models.result import WaitingAction, WaitReason
from models.snapshot import Action, Container, Placement
from models.tasks import QueueSource, TaskTemplate


class ContainerIn(Body):
    name: str = Field(default="main", description="The container's name, unique in its action.")
    resources: Quantities = Field(default_factory=dict)
    gpu: str | int | None = Field(
        default=None, description='"H100:4", "T4" (typed) or 2 (untyped NVIDIA GPUs)'
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Labels a node pool must carry for the container to land on it.",
    )


class ActionSubmit(Body):
    """One action to queue. Without an id the server makes one. Without a queue it inherits
    one: its run's, its task's, its environment's, or else the default queue's."""

    id: Name | None = Field(
        default=None,
        description="The action's id; made by the server when omitted. Submitting an id again"
        " is ALREADY_EXISTS.",
    )
    run: str | None = Field(default=None, description="defaults to the action's own id")
    queue: str | None = Field(default=None, description="this invocation's queue")
    task: str | None = Field(
        default=None,
        description="a stored task template: what this submission does not give comes from it",
    )
    run_queue: str | None = Field(
        default=None,
        description="the queue of the run, kept for its later submissions (first one sets it)",
    )
    containers: list[ContainerIn] = Field(
        default_factory=list,
        description="Its containers: `resources` and `gpu` per container (none with"
        " `environment`, or when its `task` gives them).",
    )
    environment: str | None = Field(default=None, description="a reusable environment's name")
    max_queued_time: str | float | None = Field(
        default=None,
        examples=["1h"],
        description="How long it may wait before it fails MAX_QUEUED_TIME_EXCEEDED (`1h`, or"
        " seconds).",
    )
    deadline: str | float | None = Field(
        default=None, description="a time, or a duration from submission", examples=["6h"]
    )
    expected_duration: str | float | None = Field(
        default=None,
        description="how long it runs once started, for forecasts of when waiting work starts"
        " (above 0s, at most 366d); without it, learned from its task's or queue's finished work",
        examples=["2h"],
    )

    def to_action(
        self,
        now: datetime,
        queue: str,
        task: TaskTemplate | None = None,
        where: tuple[str | int, ...] = (),
    ) -> Action:
        """The action on `queue` (resolved by the caller, see models.tasks.resolve_queue),
        with what it does not give taken from `task`."""
        data = self.model_dump(exclude_none=True, exclude={"task", "run_queue"})
        if task is not None and not self.containers and self.environment is None:
            data["containers"] = [c.model_dump() for c in task.containers]
            if task.environment is not None:
                data["environment"] = task.environment
        if task is not None and self.max_queued_time is None and task.max_queued_time:
            data["max_queued_time"] = task.max_queued_time
        if task is not None:
            data["task"] = task.name
        data["id"] = self.id or f"act-{uuid.uuid4().hex[:20]}"
        data["queue"] = queue
        data["submitted_at"] = now
        return to_domain(Action, data, where)

    def environment_of(self, task: TaskTemplate | None) -> str | None:
        """The reusable environment the action runs in, given its task."""
        if self.environment is not None or self.containers:
            return self.environment
        return None if task is None else task.environment


class ActionBatch(Body):
    """Actions accepted all together or not at all."""

    actions: list[ActionSubmit] = Field(
        min_length=1,
        max_length=10_000,
        description="The submissions, each as `POST /actions` takes it.",
    )


class BatchAccepted(BaseModel):
    ids: list[str] = Field(description="The actions' ids, in the order they were given.")


class ActionsMove(Body):
    """Waiting actions to move to queue `to`, all or none; they keep their arrival order."""

    ids: list[str] = Field(
        min_length=1, max_length=10_000, description="The waiting actions to move, by id."
    )
    to: str = Field(description="The queue to move them to.")


class QueueMove(Body):
    """Move the waiting actions of a queue (those `where` keeps) to queue `to`."""

    to: str = Field(description="The queue to move them to.")
    where: str | None = Field(
        default=None,
        max_length=200,
        description="clauses on the requests, all of which must hold",
        examples=["gpu>=8", "memory>64Gi,cpu<=16"],
    )


class Moved(BaseModel):
    to: str = Field(description="The queue they were moved to.")
    ids: list[str] = Field(description="the actions moved, in arrival order")


class ActionPublic(BaseModel):
    id: str = Field(description="The action's id.")
    run: str = Field(description="The run it belongs to (its own id for a run of one).")
    queue: str = Field(description="The queue it is charged to.")
    queue_source: QueueSource | None = Field(
        description="which level set its queue (null: stored before sources were kept)"
    )
    state: Phase = Field(description="Where it is in its life.")
    submitted_at: Timestamp = Field(description="When it was accepted.")
    containers: list[Container] = Field(
        description="What each container requests (none when it runs in `environment`)."
    )
    environment: str | None = Field(description="The reusable environment it runs in, by name.")
    max_queued_time: Duration | None = Field(
        description="How long it may wait before it fails MAX_QUEUED_TIME_EXCEEDED."
    )
    deadline: Timestamp | Duration | None = Field(
        description="When it must have finished (a time, or a duration from submission); past"
        " it, it fails DEADLINE_EXCEEDED."
    )
    task: str | None = Field(description="the stored task it was submitted as")
    expected_duration: Duration | None = Field(
        description="the submitter's estimate of its run time"
    )
    placement: Placement | None = Field(description="Where it runs, once scheduled.")
    code: ErrorCode | None = Field(description="For a failed action: its error code.")
    message: str | None = Field(description="For a failed action: why, in words.")
    scheduled_at: Timestamp | None = Field(description="When a tick placed it.")
    started_at: Timestamp | None = Field(description="When its executor reported it started.")
    finished_at: Timestamp | None = Field(description="When it succeeded, failed or was cancelled.")
    waiting_reason: WaitReason | None = Field(
        description="for a queued action, as of the last tick"
    )
    waiting_resource: str | None = Field(
        description="The resource it waits for, when the wait reason names one."
    )
    waiting_message: str | None = Field(description="Why it waits, in words.")
    queue_position: int | None = Field(
        description="for a queued action, as of the last tick: its place in its queue's line"
        " (1 is the head)"
    )
    global_position: int | None = Field(
        description="its place among every waiting action in the global order"
    )
    ahead_competing: int | None = Field(
        description="actions waiting ahead of it that could take the capacity it needs: in"
        " its queue, or able to land in one of its node pools"
    )
    estimated_start: Timestamp | None = Field(
        description="for a queued action, as of the last tick: when it is expected to start"
        " (null: not forecast yet, or unknown, which estimate_assumption then says)"
    )
    estimate_assumption: str | None = Field(
        description="what the estimate assumes (running work ends when expected, nothing new"
        " arrives), or why it is unknown"
    )

    @classmethod
    def of(
        cls, record: ActionRecord, waiting: WaitingAction | None, forecast: StartForecast | None
    ) -> ActionPublic:
        action = record.action
        waiting = waiting if record.phase is Phase.QUEUED else None
        forecast = forecast if record.phase is Phase.QUEUED else None
        return cls(
            id=action.id,
            run=action.run_id,
            queue=action.queue,
            queue_source=record.queue_source,
            state=record.phase,
            submitted_at=action.submitted_at,
            containers=action.containers,
            environment=action.environment,
            max_queued_time=action.max_queued_time,
            deadline=action.deadline,
            task=action.task,
            expected_duration=action.expected_duration,
            placement=record.placement,
            code=record.code,
            message=record.message,
            scheduled_at=record.scheduled_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
            waiting_reason=waiting.reason if waiting else None,
            waiting_resource=waiting.resource if waiting else None,
            waiting_message=waiting.message if waiting else None,
            queue_position=waiting.queue_position if waiting else None,
            global_position=waiting.global_position if waiting else None,
            ahead_competing=waiting.ahead_competing if waiting else None,
            estimated_start=forecast.estimated_start if forecast else None,
            estimate_assumption=forecast.assumption if forecast else None,
        )


class ActionExplanation(Explanation):
    """An explanation, and for a waiting action when it is expected to start (as of the last
    tick's forecast)."""

    estimated_start: Timestamp | None = Field(
        default=None, description="as in the action: when it is expected to start"
    )
    estimate_assumption: str | None = Field(
        default=None, description="what the estimate assumes, or why it is unknown"
    )

    @classmethod
    def of(cls, explanation: Explanation, forecast: StartForecast | None) -> ActionExplanation:
        # Built from the explanation's validated fields, so nothing is validated twice.
        return cls.model_construct(
            **dict(explanation),
            estimated_start=forecast.estimated_start if forecast else None,
            estimate_assumption=forecast.assumption if forecast else None,
        )
