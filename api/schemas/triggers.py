"""Bodies of the triggers' API (api.routes.triggers): a schedule, a queue, and the actions
each firing submits as one new run (a submission's fields, but id and run)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from api.schemas.actions import ContainerIn
from api.schemas.common import Body, Name, to_domain
from api.store.records import Firing, TriggerRecord
from models.fields import Duration, Timestamp
from models.snapshot import DEFAULT_QUEUE
from models.triggers import MAX_TRIGGER_ACTIONS, CatchUp, FiringOutcome, Trigger, TriggerAction

_CRON = Field(default=None, description="a cron expression: minute hour day month weekday")
_TIMEZONE = Field(default=None, description="the cron expression's time zone [default UTC]")
_EVERY = Field(default=None, description="a fixed rate instead of cron", examples=["10m"])


class TriggerActionIn(Body):
    """One action of each firing's run."""

    containers: list[ContainerIn] = Field(
        default_factory=list, description="Its containers (none with `environment`)."
    )
    environment: str | None = Field(default=None, description="a reusable environment's name")
    max_queued_time: str | float | None = Field(
        default=None,
        examples=["1h"],
        description="How long it may wait before it fails MAX_QUEUED_TIME_EXCEEDED (`1h`, or"
        " seconds).",
    )
    deadline: str | float | None = Field(
        default=None, description="a duration from the firing", examples=["6h"]
    )


class TriggerCreate(Body):
    """A trigger: `cron` (with an optional `timezone`) or `every`, and what each run holds."""

    name: Name = Field(description="The trigger's name.")
    cron: str | None = _CRON
    timezone: str | None = _TIMEZONE
    every: str | float | None = _EVERY
    queue: str = Field(default=DEFAULT_QUEUE, description="The queue each firing's run goes to.")
    actions: list[TriggerActionIn] = Field(
        min_length=1,
        max_length=MAX_TRIGGER_ACTIONS,
        description="The actions of each firing's run.",
    )
    catch_up: CatchUp = Field(
        default=CatchUp.ONE, description="times missed while the service was down: one run, or none"
    )
    paused: bool = Field(default=False, description="Create it paused: it fires only once resumed.")

    def to_trigger(self) -> Trigger:
        data = self.model_dump(exclude_none=True, exclude={"cron", "timezone", "every"})
        data["schedule"] = self.model_dump(include={"cron", "timezone", "every"}, exclude_none=True)
        return to_domain(Trigger, data, ())


class TriggerUpdate(Body):
    """Fields to change. A new `cron` or `every` replaces the schedule (a `timezone` given
    with it, or alone, applies to the cron expression); `actions` replaces every action."""

    cron: str | None = _CRON
    timezone: str | None = _TIMEZONE
    every: str | float | None = _EVERY
    queue: str | None = Field(default=None, description="A new queue for the next runs.")
    actions: list[TriggerActionIn] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TRIGGER_ACTIONS,
        description="New actions, replacing all of them.",
    )
    catch_up: CatchUp | None = Field(
        default=None,
        description="What times missed while the service was down get: one run, or none.",
    )

    def apply(self, current: Trigger) -> Trigger:
        data: dict[str, Any] = current.model_dump()
        if self.cron is not None or self.every is not None:
            data["schedule"] = {"cron": self.cron, "every": self.every, "timezone": self.timezone}
        elif self.timezone is not None:
            data["schedule"]["timezone"] = self.timezone
        data.update(self.model_dump(include={"queue", "actions", "catch_up"}, exclude_none=True))
        return to_domain(Trigger, data, ())


class FiringPublic(BaseModel):
    scheduled_for: Timestamp = Field(description="The scheduled time it fired for.")
    fired_at: Timestamp = Field(description="When it fired.")
    outcome: FiringOutcome = Field(description="What came of it.")
    run: str | None = Field(description="the run the firing submitted")
    missed: int = Field(description="scheduled times passed while the service was down")
    message: str = Field(description="The firing in words.")

    @classmethod
    def of(cls, firing: Firing) -> FiringPublic:
        return cls(
            scheduled_for=firing.scheduled_for,
            fired_at=firing.fired_at,
            outcome=firing.outcome,
            run=firing.run,
            missed=firing.missed,
            message=firing.message,
        )


class TriggerPublic(BaseModel):
    name: str = Field(description="The trigger's name.")
    cron: str | None = Field(description="Its cron expression; null for a fixed rate.")
    timezone: str | None = Field(description="The cron expression's time zone; null: UTC.")
    every: Duration | None = Field(description="Its fixed rate; null for cron.")
    schedule: str = Field(description="the schedule in words")
    queue: str = Field(description="The queue each run goes to.")
    actions: list[TriggerAction] = Field(description="The actions of each run.")
    catch_up: CatchUp = Field(
        description="What times missed while the service was down get: one run, or none."
    )
    state: str = Field(description="active or paused")
    created_at: Timestamp = Field(description="When it was created; a fixed rate counts from it.")
    next_due: Timestamp | None = Field(description="the next scheduled time; none while paused")
    history: list[FiringPublic] = Field(description="newest first")

    @classmethod
    def of(cls, record: TriggerRecord) -> TriggerPublic:
        trigger = record.trigger
        return cls(
            name=trigger.name,
            cron=trigger.schedule.cron,
            timezone=trigger.schedule.timezone,
            every=trigger.schedule.every,
            schedule=trigger.schedule.describe(),
            queue=trigger.queue,
            actions=trigger.actions,
            catch_up=trigger.catch_up,
            state="paused" if trigger.paused else "active",
            created_at=record.created_at,
            next_due=record.next_due,
            history=[FiringPublic.of(firing) for firing in record.history],
        )
