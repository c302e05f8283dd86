"""When a waiting action is expected to start, and the run times that estimate rests on.

solver.replay.forecast computes these once per tick; the service shows them on a waiting
action. A run time comes from the submitter (`expected_duration`) or is learned from
finished work: the median of the last LEARNED_WINDOW of its task that finished, else of
its queue's (at least LEARNED_MINIMUM of them).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import BaseModel, Field, TypeAdapter

from models.construct import collections_deferred
from models.encoded import EncodedModels
from models.fields import Timestamp
from models.result import LINE_ENTRIES
from models.snapshot import Action

LEARNED_WINDOW = 50
"""Finished actions per queue a learned run time looks at: the most recently submitted."""
LEARNED_MINIMUM = 3
"""Finished actions of a task (or queue) before its median stands for the others."""


class StartForecast(BaseModel):
    """One waiting action's estimated start, or None ("unknown") with the reason in
    `assumption`."""

    action: str
    estimated_start: Timestamp | None
    assumption: str = Field(max_length=1000)


_BY_ACTION: TypeAdapter[dict[str, StartForecast]] = TypeAdapter(dict[str, StartForecast])
_KEY: TypeAdapter[str] = TypeAdapter(str)  # an action id, as _BY_ACTION writes it


def forecast_lines(forecasts: Mapping[str, StartForecast]) -> list[bytes]:
    """`forecasts` (by action id) as JSON objects of at most LINE_ENTRIES each, for a reader
    to decode one at a time (models.result.split_result says why). Forecasts kept encoded
    (models.encoded) are joined as they are, not decoded and dumped again."""
    if isinstance(forecasts, EncodedModels):
        entries = [
            _KEY.dump_json(action) + b":" + encoded for action, encoded in forecasts.encoded.items()
        ]
        return [
            b"{" + b",".join(entries[i : i + LINE_ENTRIES]) + b"}"
            for i in range(0, len(entries), LINE_ENTRIES)
        ]
    items = list(forecasts.items())
    return [
        _BY_ACTION.dump_json(dict(items[i : i + LINE_ENTRIES]))
        for i in range(0, len(items), LINE_ENTRIES)
    ]


def read_forecast_lines(lines: Sequence[bytes | str]) -> dict[str, StartForecast]:
    """What `forecast_lines` split (a whole object is one line of it)."""
    forecasts: dict[str, StartForecast] = {}
    with collections_deferred():
        for line in lines:
            forecasts.update(_BY_ACTION.validate_json(line))
    return forecasts


@dataclass(frozen=True)
class FinishedRun:
    """One action that ran to success: what a learned run time is made of."""

    queue: str
    task: str | None
    seconds: float


@dataclass(frozen=True)
class LearnedDurations:
    """Median run times by task and by queue, from finished work."""

    by_task: dict[str, timedelta] = field(default_factory=dict)
    by_queue: dict[str, timedelta] = field(default_factory=dict)

    @classmethod
    def learn(cls, runs: Iterable[FinishedRun]) -> LearnedDurations:
        """From runs newest first: per queue the first LEARNED_WINDOW, and among those
        per task."""
        per_queue: dict[str, list[float]] = {}
        per_task: dict[str, list[float]] = {}
        for run in runs:
            window = per_queue.setdefault(run.queue, [])
            if len(window) >= LEARNED_WINDOW:
                continue
            window.append(run.seconds)
            if run.task is not None:
                per_task.setdefault(run.task, []).append(run.seconds)
        return cls(by_task=_medians(per_task), by_queue=_medians(per_queue))

    def expected(self, action: Action) -> tuple[timedelta | None, str]:
        """The action's run time and where it comes from (words for an assumption)."""
        if action.expected_duration is not None:
            return action.expected_duration, "its expected_duration"
        if action.task is not None and action.task in self.by_task:
            return self.by_task[action.task], f"the median of task {action.task}'s finished runs"
        if action.queue in self.by_queue:
            return self.by_queue[
                action.queue
            ], f"the median of queue {action.queue}'s finished runs"
        return None, "no expected_duration and no finished work of its task or queue to learn from"


def _medians(samples: dict[str, list[float]]) -> dict[str, timedelta]:
    return {
        name: timedelta(seconds=statistics.median(values))
        for name, values in samples.items()
        if len(values) >= LEARNED_MINIMUM
    }
