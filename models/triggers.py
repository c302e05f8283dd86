"""Triggers: a schedule that submits a new run to a queue at each of its times.

A schedule is a cron expression (croniter reads it) with an optional time zone, or a fixed
rate (`every 10m`) counted from the trigger's creation. Each firing submits the trigger's
actions as one new run, with the same fields as a submission (containers or a reusable
environment, max_queued_time, and a deadline counted from the firing).

Which times fire, and how a time missed while the service was down is treated, is decided
here (`due_times`); the store (api.store.triggers) commits a firing and the run it creates
in one transaction, so each scheduled time fires at most once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import Field, field_validator, model_validator

from models.errors import InvalidInput
from models.fields import Duration, format_duration
from models.snapshot import DEFAULT_QUEUE, Action, Container, Strict

MIN_FIXED_RATE = timedelta(seconds=1)
"""The shortest fixed rate: a tick fires what is due, so a faster rate would only batch up."""
MAX_TRIGGER_ACTIONS = 100
"""Actions of one firing's run."""
MAX_CRON_LENGTH = 200
"""Characters of a cron expression (the longest sensible one is well under 100)."""
MAX_TIMES_COUNTED = 1000
"""Missed times counted one by one after an outage; beyond that the history says 'over'."""
HISTORY_KEPT = 100
"""Firings the store keeps per trigger, newest first."""


class CatchUp(StrEnum):
    """What the times missed while the service was down get."""

    ONE = "one"  # one catch-up run, for the latest missed time
    NONE = "none"  # no run; the history says they were skipped


class FiringOutcome(StrEnum):
    FIRED = "fired"  # on time: the run was submitted
    CAUGHT_UP = "caught_up"  # one run for times missed while the service was down
    SKIPPED = "skipped"  # missed times, no run (catch_up none)
    REFUSED = "refused"  # the queue refused the run (draining, full, gone): nothing submitted


class Schedule(Strict):
    """Exactly one of `cron` (with an optional `timezone`) and `every`."""

    cron: str | None = Field(default=None, max_length=MAX_CRON_LENGTH, examples=["0 2 * * *"])
    timezone: str | None = Field(default=None, examples=["Europe/Amsterdam"])
    every: Duration | None = Field(default=None, examples=["10m"])

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None and not croniter.is_valid(value):
            raise InvalidInput(f"cron: {value!r} is not a cron expression (e.g. '0 2 * * *')")
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput(
                f"timezone: {value!r} is not a time zone (e.g. UTC, Europe/Amsterdam)"
            ) from None
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.cron is None) == (self.every is None):
            raise InvalidInput("schedule: give either a cron expression or a fixed rate (every)")
        if self.timezone is not None and self.cron is None:
            raise InvalidInput("timezone: only a cron schedule has a time zone")
        if self.every is not None and self.every < MIN_FIXED_RATE:
            raise InvalidInput(f"every: a fixed rate is at least {MIN_FIXED_RATE.seconds} s")
        return self

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron!r}" + (f" ({self.timezone})" if self.timezone else " (UTC)")
        assert self.every is not None
        return f"every {format_duration(self.every)}"

    def next_after(self, after: datetime, anchor: datetime) -> datetime:
        """The first scheduled time strictly after `after`; a fixed rate counts from `anchor`."""
        if self.every is not None:
            steps = max(0, math.floor((after - anchor) / self.every)) + 1
            return anchor + steps * self.every
        zone = ZoneInfo(self.timezone or "UTC")
        found: datetime = croniter(self.cron, after.astimezone(zone)).get_next(datetime)
        return found.astimezone(UTC)


class TriggerAction(Strict):
    """One action of the run each firing submits: a submission's fields but id and run."""

    containers: list[Container] = Field(
        default_factory=list, description="Its containers (none when it runs in `environment`)."
    )
    environment: str | None = Field(
        default=None, description="The reusable environment it runs in, by name."
    )
    max_queued_time: Duration | None = Field(
        default=None, description="How long it may wait before it fails MAX_QUEUED_TIME_EXCEEDED."
    )
    deadline: Duration | None = Field(default=None, description="counted from the firing")


class Trigger(Strict):
    """A schedule, the queue its runs go to, and what each run holds."""

    name: str = Field(min_length=1)
    schedule: Schedule
    queue: str = DEFAULT_QUEUE
    actions: list[TriggerAction] = Field(min_length=1, max_length=MAX_TRIGGER_ACTIONS)
    catch_up: CatchUp = CatchUp.ONE
    paused: bool = False

    @model_validator(mode="after")
    def _actions_valid(self) -> Self:
        """An action a firing could not build is refused now, not at 2 in the morning."""
        self.run_actions("check", datetime(2000, 1, 1, tzinfo=UTC))
        return self

    def run_actions(self, run: str, at: datetime) -> list[Action]:
        """The actions of run `run`, submitted at `at`; one action takes the run's id."""
        ids = [run] if len(self.actions) == 1 else [f"{run}-{i}" for i in range(len(self.actions))]
        return [
            Action(
                id=one,
                run=run,
                queue=self.queue,
                submitted_at=at,
                containers=template.containers,
                environment=template.environment,
                max_queued_time=template.max_queued_time,
                deadline=template.deadline,
            )
            for one, template in zip(ids, self.actions, strict=True)
        ]


@dataclass(frozen=True)
class DueTimes:
    """The scheduled times from a trigger's next due time up to now, split by lateness."""

    on_time: list[datetime]  # within the grace: fired, one run each
    missed: int  # older than the grace: passed while the service was down
    missed_over: bool  # more than MAX_TIMES_COUNTED missed: `missed` is that bound
    latest_missed: datetime | None
    next_due: datetime  # the first scheduled time after now


def due_times(
    schedule: Schedule, next_due: datetime, now: datetime, anchor: datetime, grace: timedelta
) -> DueTimes:
    """Split the times in [next_due, now] into on time (now - time <= grace) and missed."""
    window = now - grace
    on_time: list[datetime] = []
    missed, over, latest_missed = 0, False, None
    at = next_due
    while at <= now:
        if at >= window:
            on_time.append(at)
        elif missed < MAX_TIMES_COUNTED:
            missed, latest_missed = missed + 1, at
        else:  # a long outage of a fast schedule: jump to the last time before the window
            over, latest_missed = True, _last_before(schedule, window, anchor)
            at = latest_missed
        at = schedule.next_after(at, anchor)
    return DueTimes(on_time, missed, over, latest_missed, at)


def _last_before(schedule: Schedule, bound: datetime, anchor: datetime) -> datetime:
    """The latest scheduled time strictly before `bound`."""
    if schedule.every is not None:
        return anchor + (math.ceil((bound - anchor) / schedule.every) - 1) * schedule.every
    zone = ZoneInfo(schedule.timezone or "UTC")
    found: datetime = croniter(schedule.cron, bound.astimezone(zone)).get_prev(datetime)
    return found.astimezone(UTC)
