"""One action's explanation on request (`GET /actions/{id}/explanation`), solved at most once
per action per tick.

The explanation judges the action against the store as it is now, with the last tick's
decisions for the actions ahead of it (those it admitted are running work by now). A
queued action the service has not ticked yet is explained after a tick of its own; a
failed one against the queues and clusters of now.

The solve runs in the service's explanation worker (api.solver_process), which reads the
store itself as the tick's worker does, with the service's model budget. Its answer is kept
until the next tick is written back, so any number of viewers polling one action cost one
solve a tick; one solve runs at a time, and a request for an action being explained waits
for that answer instead of starting another. The cache holds at most `size` actions a tick
(past that, the oldest is dropped and solved again if asked for).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import UTC, datetime

from api.solver_process import Solves
from api.store.records import ActionRecord, Phase, Store
from api.tick_work import (
    explain_failure_from_file,
    explain_failure_kept,
    explain_from_file,
    explain_with_text,
)
from api.ticker import TickLoop
from models.errors import ErrorCode, FailedPrecondition
from models.explanation import Explanation
from solver import TickOptions

# Failures the scheduler decides; any other code came from an executor, at run time.
SCHEDULING_FAILURES = (
    ErrorCode.INFEASIBLE,
    ErrorCode.MAX_QUEUED_TIME_EXCEEDED,
    ErrorCode.DEADLINE_EXCEEDED,
)
CACHED_PER_TICK = 1024


class ActionExplanations:
    def __init__(
        self,
        store: Store,
        ticker: TickLoop,
        solves: Solves,
        options: TickOptions,
        database: str | None = None,
        size: int = CACHED_PER_TICK,
    ) -> None:
        """`database`: the store's (a SQLite file or a PostgreSQL URL), which `solves` (a
        worker process) reads the store from itself; None: the snapshot is read here."""
        self.store = store
        self.database = database
        self.ticker = ticker
        self.solves = solves
        self.options = options
        self.size = size
        self.solves_run = 0  # explanation solves since start (for /metrics)
        self._tick = -1  # the tick the cached answers belong to
        self._cached: OrderedDict[str, Explanation] = OrderedDict()
        self._one_at_a_time = asyncio.Lock()

    async def get(self, action_id: str) -> Explanation:
        """The action's explanation as of the last tick; errors (unknown action, finished
        action) are raised, never cached."""
        cached = self._current(action_id)
        if cached is not None:  # no wait behind another action's solve
            return cached
        async with self._one_at_a_time:
            cached = self._current(action_id)  # solved while this request waited
            if cached is not None:
                return cached
            tick = self._tick
            explanation = await self._solve(action_id)
            if self.ticker.stats.last_number == tick:  # not already superseded by a newer tick
                self._cached[action_id] = explanation
                if len(self._cached) > self.size:
                    self._cached.popitem(last=False)
            return explanation

    def _current(self, action_id: str) -> Explanation | None:
        """The answer kept for this tick, if any; a new tick drops the last one's. Called on
        the event loop only, so the cache needs no lock of its own."""
        if self.ticker.stats.last_number != self._tick:
            self._tick = self.ticker.stats.last_number
            self._cached.clear()
        return self._cached.get(action_id)

    async def _solve(self, action_id: str) -> Explanation:
        record = await asyncio.to_thread(self.store.get_action, action_id)
        failed = record.phase is Phase.FAILED and record.code in SCHEDULING_FAILURES
        if not failed and not record.phase.live:
            detail = f" ({record.code}: {record.message})" if record.code else ""
            raise FailedPrecondition(
                f"action {action_id} is {record.phase.value}{detail}: explanations cover queued,"
                " scheduled, running and unschedulable actions"
            )
        now = datetime.now(UTC)
        self.solves_run += 1
        if self.database is not None:
            return await self._solve_in_worker(self.database, now, record, failed)
        snapshot = await asyncio.to_thread(self.store.read_snapshot, now)
        if failed:
            return await self.solves.run(
                explain_failure_kept,
                snapshot,
                record.action,
                record.code,
                record.message or "",
                self.options,
            )
        return await self.solves.run(
            explain_with_text, snapshot, action_id, self.ticker.last_text, self.options
        )

    async def _solve_in_worker(
        self, path: str, now: datetime, record: ActionRecord, failed: bool
    ) -> Explanation:
        """The worker reads the store itself: the server neither reads nor sends a snapshot."""
        if failed and record.code is not None:
            wire = await self.solves.run(
                explain_failure_from_file,
                path,
                now,
                record.action,
                record.code,
                record.message or "",
                self.options,
            )
        else:
            wire = await self.solves.run(
                explain_from_file, path, now, record.action.id, self.ticker.last_text, self.options
            )
        return Explanation.model_validate_json(wire)
