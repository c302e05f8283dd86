"""The tick loop: snapshot, solve, write back, on a fixed period, never overlapping.

The loop runs as one asyncio task in the app's lifespan. The tick's writes (before the
snapshot, and the write-back transaction) run in threads of this process, which stays the
store's only writer; the CPU-bound part (reading the snapshot, the solve and the blocked
heads' explanations, api.tick_work) runs in the worker of api.solver_process, so neither
the event loop nor the request threads wait on it. A tick whose snapshot the store has moved
past is refused at write-back (api.store.records.SnapshotOvertaken): it is counted, not a
failure, and the next tick re-plans. A worker that dies or overruns fails its tick, and
the next tick runs in a new worker.

Only the replica that holds the leader lease ticks (api.leader); the others follow: they
read the last tick any leader wrote back from the database (its result, its blocked heads'
explanations, the actions it failed at their deadline, and its forecasts once made), so their
watchers and views see every tick, and show what the leader shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from api.leader import Leadership
from api.solver_process import Solves, ThreadSolves
from api.store.records import (
    AppliedTick,
    LeaseLost,
    SnapshotOvertaken,
    Store,
    TickViews,
    TickWriteBack,
)
from api.tick_work import (
    ForecastFn,
    Forecasting,
    HeadExplaining,
    SolvedTick,
    TickAnswer,
    TickFn,
    answer_tick,
    forecast_kept,
    read_ahead,
    solve_from_file,
)
from models.errors import SluiceError
from models.explanation import Explanation
from models.forecast import LearnedDurations, StartForecast
from models.result import TickResult, WaitingAction, result_summary

log = logging.getLogger("sluice.tick")


@dataclass
class TickStats:
    ticks: int = 0  # completed ticks whose decisions were written back
    failures: int = 0
    overruns: int = 0
    overtaken: int = 0  # ticks refused at write-back: the store changed since their snapshot
    fenced: int = 0  # ticks refused at write-back: another replica took the lease meanwhile
    # Input the engine or the store could not represent, isolated so the line goes on: actions
    # failed for it (since start), node pools the last tick left out.
    rejected_actions: int = 0
    skipped_pools: int = 0
    wall_guard_hits: int = 0  # ticks whose model checks the service's wall-clock guard cut
    workers_replaced: int = 0  # tick workers that died or overran, and were replaced
    worker_pid: int | None = None  # the process that solved the last tick
    last_duration_s: float = 0.0  # snapshot + solve + write-back of the last tick
    last_finished_at: datetime | None = None  # of the last tick any leader wrote back
    last_number: int = 0  # that tick's number in the database (the watch stream's event id)
    last_error: str | None = None
    phases_s: dict[str, float] = field(default_factory=dict)


class TickLoop:
    """Runs ticks on a period and keeps the last result for metrics and watchers."""

    def __init__(
        self,
        store: Store,
        tick_fn: TickFn,
        period_s: float,
        heads: HeadExplaining,
        solves: Solves | None = None,
        database: str | None = None,
        forecast_fn: ForecastFn | None = None,
    ) -> None:
        """`database`: the store's (a SQLite file or a PostgreSQL URL), which `solves` (a
        worker process) reads each tick's snapshot from itself; None: the snapshot is read
        here and sent to the worker pickled. `forecast_fn`: start forecasts of the waiting
        actions, made after each tick's write-back (api.tick_work); None: no forecasts."""
        self.store = store
        self.leadership = Leadership(store, period_s)
        self.tick_fn = tick_fn
        self.forecast_fn = forecast_fn
        # What the solving process keeps each tick under, for the forecast after it.
        self._keep_as = f"tick-loop-{id(self)}" if forecast_fn is not None else None
        self._ahead: asyncio.Task[None] | None = None  # a follower's read of the snapshot
        self.period_s = period_s
        self.heads = heads
        self.solves = solves or ThreadSolves()
        self.database = database
        self.stats = TickStats()
        # The last tick's result without its lists of actions (its time, the queues' usage,
        # the quota part: models.result.result_summary), its waiting actions' reasons by
        # action id, and the whole result as text (models.result.result_text) for the
        # explanations. A leader keeps the waiting entries as the worker encoded them, and
        # decodes the one a read shows (models.encoded).
        self.last_summary: TickResult | None = None
        self.waiting: Mapping[str, WaitingAction] = {}
        self.last_text: str | None = None
        # The last tick's explanations of blocked strict_fifo heads, by queue name.
        self.head_explanations: dict[str, Explanation] = {}
        # The last forecasts made, by action id: the last tick's, or until they come, the
        # tick's before (`forecast` shows them only for actions still waiting).
        self.forecasts: Mapping[str, StartForecast] = {}
        self._forecasts_of = 0  # the tick whose forecasts those are
        # Scheduled or running actions the last tick failed at their deadline, by queue (the
        # watch streams tell their executors to stop them); ids expired by a tick that was
        # not written back wait for the next one that is.
        self.deadline_exceeded: dict[str, list[str]] = {}
        self._expired: dict[str, list[str]] = {}
        # Called with the stats after each written-back tick (api.metrics' histogram).
        self.on_tick: list[Callable[[TickStats], None]] = []
        self._ticked = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()  # the next tick starts now: stopping, or just elected
        # The epoch of the last tick started. A renewal that finds this replica leading at
        # another epoch was elected meanwhile; compared with the epoch before the renewal
        # instead, the start-up tick's own election (made while the renewal waited on the
        # lease's lock) read as a new one, and a second tick followed at once.
        self._ticking_epoch: int | None = None
        self._one_at_a_time = asyncio.Lock()  # ticks never overlap, whoever starts them
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # triggers, deadlines

    def stop(self) -> None:
        """End `run_forever` after the tick in progress (if any) has been written back."""
        self._stopping.set()
        self._wake.set()

    async def run_forever(self) -> None:
        keeper = asyncio.create_task(self._keep_lease(), name="leader-lease")
        try:
            await self._tick_forever()
        finally:
            for task in (keeper, self._ahead):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await asyncio.to_thread(self.leadership.release)

    async def _keep_lease(self) -> None:
        """Renew the lease (or try to take it) a few times a period; while another replica
        leads, pick up each tick it writes back."""
        while True:
            epoch = await asyncio.to_thread(self.leadership.hold)
            if epoch is None:
                await self.follow()
            elif epoch != self._ticking_epoch:  # just elected: tick now, not a period from now
                self._wake.set()
            await asyncio.sleep(self.leadership.renew_every_s)

    async def follow(self) -> None:
        """Take the last tick from the database if it is newer than the one shown, and wake
        the watchers; then its forecasts, once its leader has stored them."""
        try:
            last = await asyncio.to_thread(self.store.last_tick, self.stats.last_number)
            if last.number > self.stats.last_number and last.result is not None:
                self.stats.last_finished_at = last.finished_at
                summary, waiting = await asyncio.to_thread(_shown, last.result)
                await self._show(summary, waiting, last.text, last.number, last.views)
                self._read_ahead()
            shown = self.stats.last_number
            if shown and self._forecasts_of != shown:
                forecasts = await asyncio.to_thread(self.store.tick_forecasts, shown)
                if forecasts is not None and self.stats.last_number == shown:
                    self.forecasts, self._forecasts_of = forecasts, shown
        except SluiceError as error:
            log.warning("could not read the last tick: %s", error.message)

    def _read_ahead(self) -> None:
        """On a follower, once per tick the leader writes back: the worker reads the snapshot
        as a tick would, so its kept actions are warm if this replica is elected (a cold read
        of thousands of actions held a new leader's first tick for seconds). In the
        background: the lease is never renewed later for it."""
        if self.database is None or not (self._ahead is None or self._ahead.done()):
            return
        self._ahead = asyncio.create_task(self._read_ahead_once(self.database))

    async def _read_ahead_once(self, database: str) -> None:
        try:
            await self.solves.run(read_ahead, database, datetime.now(UTC))
        except Exception as error:  # only a warm-up: the next tick reads what it needs
            log.warning("reading ahead failed: %s", error)

    async def _show(
        self,
        summary: TickResult,
        waiting: Mapping[str, WaitingAction],
        text: str | None,
        number: int,
        views: TickViews,
    ) -> None:
        """Make this tick the one views and metrics show, and wake the watchers. Until its
        forecasts are made (or read), those of the last tick for the actions still waiting
        (`forecast`)."""
        async with self._ticked:
            self.last_summary, self.waiting, self.last_text = summary, waiting, text
            self.head_explanations = views.head_explanations
            self.deadline_exceeded = views.deadline_exceeded
            self.stats.last_number = number
            self._ticked.notify_all()

    def forecast(self, action_id: str) -> StartForecast | None:
        """When the action should start, if the last tick left it waiting: the forecast made
        after that tick, or until it is made, after the tick before (filtered here, when read,
        rather than for every action at each tick)."""
        return self.forecasts.get(action_id) if action_id in self.waiting else None

    async def _tick_forever(self) -> None:
        while not self._stopping.is_set():
            started = time.perf_counter()
            await self.run_once()
            self._wake.clear()  # a wake-up while it ran (elected meanwhile) is served by it
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
            if self._stopping.is_set():
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, self.period_s - elapsed))

    async def run_once(self) -> TickResult | None:
        """One tick; a failure is logged and counted, and the loop goes on. Returns the
        written-back tick's summary (models.result.result_summary), else None."""
        async with self._one_at_a_time:
            started = time.perf_counter()
            epoch = self.leadership.current()
            if epoch is None:
                epoch = await asyncio.to_thread(self.leadership.hold)
            if epoch is None:  # another replica leads
                await self.follow()
                return None
            self._ticking_epoch = epoch
            try:
                answer, solved, write, applied, phases = await self._tick(epoch)
            except LeaseLost as error:
                self.stats.fenced += 1
                self.leadership.lost()
                log.warning("tick not applied: %s", error.message)
                return None
            except SnapshotOvertaken as error:
                self.stats.overtaken += 1
                log.info(  # expected after a change
                    "tick not applied: %s", error.message, extra={"tick": self.stats.ticks + 1}
                )
                return None
            except Exception as error:  # a bug in one tick must not stop the service
                self.stats.failures += 1
                self.stats.workers_replaced = self.solves.replaced
                self.stats.last_error = f"{type(error).__name__}: {error}"
                log.exception(
                    "tick failed; retrying next period", extra={"tick": self.stats.ticks + 1}
                )
                return None
            await self._record(answer, solved, write, applied, phases, started)
            await self._forecast(applied.number)
            return solved.result

    async def _record(
        self,
        answer: TickAnswer,
        solved: SolvedTick,
        write: TickWriteBack,
        applied: AppliedTick,
        phases: dict[str, float],
        started: float,
    ) -> None:
        """Keep a written-back tick for metrics and watchers, and wake the watchers."""
        result = solved.result
        self.stats.rejected_actions += result.solver.rejected_actions
        self.stats.skipped_pools = result.solver.skipped_pools
        self.stats.wall_guard_hits += result.solver.wall_guard_hit
        self.stats.last_duration_s = time.perf_counter() - started
        self.stats.phases_s = phases
        self.stats.last_finished_at = datetime.now(UTC)
        self.stats.last_error = None
        self.stats.worker_pid = solved.worker_pid
        self.stats.workers_replaced = self.solves.replaced
        views = TickViews(solved.head_explanations, self._expired)
        self._expired = {}
        self.stats.ticks += 1
        waiting = answer.waiting
        await self._show(result, waiting, answer.text, applied.number, views)
        for listener in self.on_tick:
            listener(self.stats)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "tick %d: %d scheduled, %d failed, %d waiting in %.3f s",
                self.stats.ticks,
                applied.scheduled,
                applied.failed,
                len(waiting),
                self.stats.last_duration_s,
                extra={
                    "tick": self.stats.ticks,
                    "scheduled": [row[0] for row in write.rows.scheduled],
                    "failed": [row[0] for row in write.rows.failed],
                    "stale": applied.stale,
                },
            )

    def _before_snapshot(self, epoch: int) -> None:
        """Fail scheduled and running actions whose deadline has come and stop reusable pools
        idle past their idle_timeout (their charges free up for this tick), then submit the
        runs of triggers due by now, so this tick plans them.

        A trigger's time more than two periods old (at least a second) passed while the
        service was down, or while ticks overran: the trigger's catch_up decides. Each of
        these writes commits only while this replica leads at `epoch`."""
        now = self.clock()
        for action_id in self.store.expire_deadlines(now, epoch=epoch):
            queue = self.store.get_action(action_id).action.queue
            self._expired.setdefault(queue, []).append(action_id)
        self.store.stop_idle_environments(now, epoch=epoch)
        grace = timedelta(seconds=max(2 * self.period_s, 1.0))
        self.store.fire_triggers(now, grace, epoch=epoch)

    async def _tick(
        self, epoch: int
    ) -> tuple[TickAnswer, SolvedTick, TickWriteBack, AppliedTick, dict[str, float]]:
        """Solve in the worker, which reads the snapshot itself; or, in thread mode, read and
        solve in threads here. Either way the answer comes in the forms this process keeps
        (api.tick_work.TickAnswer), and the write-back runs here, in a thread.

        `handoff` is the worker call's time beyond its read, solve and explanations:
        starting the call, making the answer's forms and decoding its summary (the pre-tick
        writes are in no phase)."""
        await asyncio.to_thread(self._before_snapshot, epoch)
        clock = time.perf_counter()
        if self.database is None:
            planned = await asyncio.to_thread(self.store.read_tick_input, datetime.now(UTC))
            read_s = time.perf_counter() - clock
            answer = await self.solves.run(
                answer_tick, self.tick_fn, planned.snapshot, self.heads, self._keep_as
            )
            generation, rejected = planned.generation, planned.rejected
        else:
            now = datetime.now(UTC)
            worker = await self.solves.run(
                solve_from_file, self.database, now, self.tick_fn, self.heads, self._keep_as
            )
            answer, generation, read_s = worker.answer, worker.generation, worker.read_s
            rejected = await asyncio.to_thread(self.store.fail_unreadable, worker.unreadable, now)
        solved, write = await asyncio.to_thread(answer.decode)
        self.stats.rejected_actions += rejected
        returned = time.perf_counter()
        views = TickViews(solved.head_explanations, self._expired)
        applied = await asyncio.to_thread(
            functools.partial(self.store.apply_tick, epoch=epoch, views=views),
            write,
            generation,
        )
        phases = {
            "snapshot": read_s,
            "solve": solved.solve_s,
            "explain": solved.explain_s,
            "handoff": max(0.0, returned - clock - read_s - solved.solve_s - solved.explain_s),
            "write": time.perf_counter() - returned,
        }
        return answer, solved, write, applied, phases

    async def _forecast(self, number: int) -> None:
        """After written-back tick `number`: when each action it left waiting should start,
        made in the process that solved it (which kept its snapshot), with the run times
        learned from finished work read here, then stored with the tick for the followers.
        A failure leaves the actions without forecasts."""
        if self.forecast_fn is None or self._keep_as is None:
            return
        started = time.perf_counter()
        try:
            learned = await asyncio.to_thread(
                lambda: LearnedDurations.learn(self.store.finished_runs())
            )
            forecasting = Forecasting(self.forecast_fn, learned)
            self.forecasts = await self.solves.run(forecast_kept, self._keep_as, forecasting)
        except Exception:  # the tick's decisions stand whatever happens here
            log.exception("forecast failed; waiting actions show none this tick")
            self.forecasts = {}
        self._forecasts_of = number
        try:
            await asyncio.to_thread(self.store.record_forecasts, number, self.forecasts)
        except SluiceError as error:  # followers show the last tick's meanwhile
            log.warning("could not store the forecasts: %s", error.message)
        self.stats.phases_s["forecast"] = time.perf_counter() - started

    async def wait_for_tick(self, after: int) -> int:
        """Wait until a tick numbered past `after` has been written back (by any leader);
        return its number."""
        async with self._ticked:
            await self._ticked.wait_for(lambda: self.stats.last_number > after)
            return self.stats.last_number


def _shown(result: TickResult) -> tuple[TickResult, dict[str, WaitingAction]]:
    """What a follower shows of a tick it read whole: its summary, and its waiting actions
    by id (the leader's worker sends these in this form)."""
    return result_summary(result), {entry.action: entry for entry in result.waiting}
