"""The tick loop: snapshot, solve, write back, on a fixed period, never overlapping.

The loop runs as one asyncio task in the app's lifespan. Each tick's blocking
work (reading the snapshot, the CPU-bound solve, the write-back transaction)
runs in one worker thread, so the event loop keeps serving requests. A tick whose
snapshot the store has moved past is refused at write-back (api.store.records.
SnapshotOvertaken): it is counted, not a failure, and the next tick re-plans.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from api.store.records import AppliedTick, SnapshotOvertaken, Store
from models.forecast import LearnedDurations, StartForecast
from models.result import TickResult, WaitingAction
from models.snapshot import Snapshot
from solver import TickOptions, tick
from solver.replay.forecast import ForecastBudget, forecast

log = logging.getLogger("sluice.tick")

TickFn = Callable[[Snapshot], TickResult]
ForecastFn = Callable[[Snapshot, TickResult, LearnedDurations], dict[str, StartForecast]]
"""After a tick: its snapshot, its result and the learned run times -> forecasts by action."""


def solver_tick(time_limit_s: float, wall_guard_s: float | None = None) -> TickFn:
    """The real engine, with the service's time limit and wall-clock guard."""
    options = TickOptions(time_limit_s=time_limit_s, wall_guard_s=wall_guard_s)
    return lambda snapshot: tick(snapshot, options)


FORECAST_GRID_S = 60.0
"""The least time between a forecast's simulated ticks: estimates to the minute, so its
ticks reach hours ahead rather than a few periods of a fast service."""


def service_forecast(period_s: float, time_limit_s: float) -> ForecastFn:
    """Forecasts whose simulated ticks share one tick's counted model-check limit, so
    forecasting costs about one more tick (solver.replay.forecast)."""
    ticks = ForecastBudget().ticks
    budget = ForecastBudget(
        period_s=max(period_s, FORECAST_GRID_S),
        tick=TickOptions(time_limit_s=time_limit_s / ticks),
    )
    return lambda snapshot, result, learned: forecast(snapshot, result, learned, budget)


@dataclass(frozen=True)
class _Ticked:
    """What one tick's blocking part hands back to the loop."""

    result: TickResult
    applied: AppliedTick
    phases: dict[str, float]
    rejected: int
    forecasts: dict[str, StartForecast]


@dataclass
class TickStats:
    ticks: int = 0  # completed ticks whose decisions were written back
    failures: int = 0
    overruns: int = 0
    overtaken: int = 0  # ticks refused at write-back: the store changed since their snapshot
    # Input the engine or the store could not represent, isolated so the line goes on: actions
    # failed for it (since start), node pools the last tick left out.
    rejected_actions: int = 0
    skipped_pools: int = 0
    wall_guard_hits: int = 0  # ticks whose model checks the service's wall-clock guard cut
    last_duration_s: float = 0.0  # snapshot + solve + write-back of the last tick
    last_finished_at: datetime | None = None
    last_error: str | None = None
    phases_s: dict[str, float] = field(default_factory=dict)


class TickLoop:
    """Runs ticks on a period and keeps the last result for metrics and watchers."""

    def __init__(
        self,
        store: Store,
        tick_fn: TickFn,
        period_s: float,
        forecast_fn: ForecastFn | None = None,
    ) -> None:
        self.store = store
        self.tick_fn = tick_fn
        self.forecast_fn = forecast_fn
        self.period_s = period_s
        self.stats = TickStats()
        self.last_result: TickResult | None = None
        self.waiting: dict[str, WaitingAction] = {}  # the last tick's reasons, by action id
        # Scheduled or running actions the last tick failed at their deadline, by queue (the
        # watch streams tell their executors to stop them); ids expired by a tick that was
        # not written back wait for the next one that is.
        self.deadline_exceeded: dict[str, list[str]] = {}
        self._expired: dict[str, list[str]] = {}
        self.forecasts: dict[str, StartForecast] = {}  # the last tick's, by waiting action id
        # Called with the stats after each written-back tick (api.metrics' histogram).
        self.on_tick: list[Callable[[TickStats], None]] = []
        self._ticked = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._one_at_a_time = asyncio.Lock()  # ticks never overlap, whoever starts them
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # triggers, deadlines

    def stop(self) -> None:
        """End `run_forever` after the tick in progress (if any) has been written back."""
        self._stopping.set()

    async def run_forever(self) -> None:
        while not self._stopping.is_set():
            started = time.perf_counter()
            await self.run_once()
            elapsed = time.perf_counter() - started
            if elapsed > self.period_s:
                self.stats.overruns += 1
                log.warning(
                    "tick %d took %.3f s, over its %.3f s period; the next one starts now",
                    self.stats.ticks,
                    elapsed,
                    self.period_s,
                    extra={"tick": self.stats.ticks},
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._stopping.wait(), timeout=max(0.0, self.period_s - elapsed)
                )

    async def run_once(self) -> TickResult | None:
        """One tick; a failure is logged and counted, and the loop goes on."""
        async with self._one_at_a_time:
            started = time.perf_counter()
            try:
                ticked = await asyncio.to_thread(self._tick_blocking)
            except SnapshotOvertaken as error:
                self.stats.overtaken += 1
                log.info(  # expected after a change
                    "tick not applied: %s", error.message, extra={"tick": self.stats.ticks + 1}
                )
                return None
            except Exception as error:  # a bug in one tick must not stop the service
                self.stats.failures += 1
                self.stats.last_error = f"{type(error).__name__}: {error}"
                log.exception(
                    "tick failed; retrying next period", extra={"tick": self.stats.ticks + 1}
                )
                return None
            self.stats.rejected_actions += ticked.rejected
            return await self._record(ticked, started)

    async def _record(self, ticked: _Ticked, started: float) -> TickResult:
        """Keep a written-back tick for metrics and watchers, and wake the watchers."""
        result, applied = ticked.result, ticked.applied
        self.stats.rejected_actions += result.solver.rejected_actions
        self.stats.skipped_pools = result.solver.skipped_pools
        self.stats.wall_guard_hits += result.solver.wall_guard_hit
        self.stats.last_duration_s = time.perf_counter() - started
        self.stats.phases_s = ticked.phases
        self.stats.last_finished_at = datetime.now(UTC)
        self.stats.last_error = None
        self.last_result = result
        self.waiting = {entry.action: entry for entry in result.waiting}
        self.deadline_exceeded, self._expired = self._expired, {}
        self.forecasts = ticked.forecasts
        async with self._ticked:
            self.stats.ticks += 1
            self._ticked.notify_all()
        for listener in self.on_tick:
            listener(self.stats)
        log.debug(
            "tick %d: %d scheduled, %d failed, %d waiting in %.3f s",
            self.stats.ticks,
            applied.scheduled,
            applied.failed,
            len(result.waiting),
            self.stats.last_duration_s,
            extra={
                "tick": self.stats.ticks,
                "scheduled": [decision.action for decision in result.scheduled],
                "failed": [failure.action for failure in result.failed],
                "stale": applied.stale,
            },
        )
        return result

    def _before_snapshot(self) -> None:
        """Fail scheduled and running actions whose deadline has come and stop reusable pools
        idle past their idle_timeout (their charges free up for this tick), then submit the
        runs of triggers due by now, so this tick plans them.

        A trigger's time more than two periods old (at least a second) passed while the
        service was down, or while ticks overran: the trigger's catch_up decides."""
        now = self.clock()
        for action_id in self.store.expire_deadlines(now):
            queue = self.store.get_action(action_id).action.queue
            self._expired.setdefault(queue, []).append(action_id)
        self.store.stop_idle_environments(now)
        self.store.fire_triggers(now, timedelta(seconds=max(2 * self.period_s, 1.0)))

    def _tick_blocking(self) -> _Ticked:
        self._before_snapshot()
        clock = time.perf_counter()
        planned = self.store.read_tick_input(datetime.now(UTC))
        read_s = time.perf_counter() - clock
        result = self.tick_fn(planned.snapshot)
        solve_s = time.perf_counter() - clock - read_s
        applied = self.store.apply_tick(result, planned.generation)
        write_s = time.perf_counter() - clock - read_s - solve_s
        forecasts = self._forecast(planned.snapshot, result)
        forecast_s = time.perf_counter() - clock - read_s - solve_s - write_s
        phases = {"snapshot": read_s, "solve": solve_s, "write": write_s, "forecast": forecast_s}
        return _Ticked(result, applied, phases, planned.rejected, forecasts)

    def _forecast(self, snapshot: Snapshot, result: TickResult) -> dict[str, StartForecast]:
        """Once per tick, after its write-back: when each waiting action should start. A
        failure here leaves the tick's decisions standing and the actions without forecasts."""
        if self.forecast_fn is None or not result.waiting:
            return {}
        try:
            learned = LearnedDurations.learn(self.store.finished_runs())
            return self.forecast_fn(snapshot, result, learned)
        except Exception:  # a bug in a forecast must not undo or stop the ticks
            log.exception("forecast failed; waiting actions show none this tick")
            return {}

    async def wait_for_tick(self, after: int) -> int:
        """Wait until more than `after` ticks have completed; return the count."""
        async with self._ticked:
            await self._ticked.wait_for(lambda: self.stats.ticks > after)
            return self.stats.ticks
