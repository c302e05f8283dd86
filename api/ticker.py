"""The tick loop: snapshot, solve, write back, on a fixed period, never overlapping.

The loop runs as one asyncio task in the app's lifespan. Each tick's blocking
work (reading the snapshot, the CPU-bound solve, the write-back transaction)
runs in one worker thread, so the event loop keeps serving requests. A tick whose
snapshot the store has moved past is refused at write-back (api.store.records.
SnapshotOvertaken): it is counted, not a failure, and the next tick re-plans.

Only the replica that holds the leader lease ticks (api.leader); the others follow: they
read the last tick any leader wrote back from the database, so their watchers and views
see every tick too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from api.leader import Leadership
from api.store.records import AppliedTick, LeaseLost, SnapshotOvertaken, Store
from models.errors import SluiceError
from models.result import TickResult, WaitingAction
from models.snapshot import Snapshot
from solver import TickOptions, tick

log = logging.getLogger("sluice.tick")

TickFn = Callable[[Snapshot], TickResult]


def solver_tick(time_limit_s: float, wall_guard_s: float | None = None) -> TickFn:
    """The real engine, with the service's time limit and wall-clock guard."""
    options = TickOptions(time_limit_s=time_limit_s, wall_guard_s=wall_guard_s)
    return lambda snapshot: tick(snapshot, options)


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
    last_duration_s: float = 0.0  # snapshot + solve + write-back of the last tick
    last_finished_at: datetime | None = None  # of the last tick any leader wrote back
    last_number: int = 0  # that tick's number in the database (the watch stream's event id)
    last_error: str | None = None
    phases_s: dict[str, float] = field(default_factory=dict)


class TickLoop:
    """Runs ticks on a period and keeps the last result for metrics and watchers."""

    def __init__(self, store: Store, tick_fn: TickFn, period_s: float) -> None:
        self.store = store
        self.leadership = Leadership(store, period_s)
        self.tick_fn = tick_fn
        self.period_s = period_s
        self.stats = TickStats()
        self.last_result: TickResult | None = None
        self.waiting: dict[str, WaitingAction] = {}  # the last tick's reasons, by action id
        # Called with the stats after each written-back tick (api.metrics' histogram).
        self.on_tick: list[Callable[[TickStats], None]] = []
        self._ticked = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()  # the next tick starts now: stopping, or just elected
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
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            await asyncio.to_thread(self.leadership.release)

    async def _keep_lease(self) -> None:
        """Renew the lease (or try to take it) a few times a period; while another replica
        leads, pick up each tick it writes back."""
        while True:
            before = self.leadership.epoch
            epoch = await asyncio.to_thread(self.leadership.hold)
            if epoch is None:
                await self.follow()
            elif epoch != before:  # just elected: tick now, not a period from now
                self._wake.set()
            await asyncio.sleep(self.leadership.renew_every_s)

    async def follow(self) -> None:
        """Take the last tick from the database if it is newer than the one shown, and wake
        the watchers."""
        try:
            last = await asyncio.to_thread(self.store.last_tick, self.stats.last_number)
        except SluiceError as error:
            log.warning("could not read the last tick: %s", error.message)
            return
        if last.number <= self.stats.last_number or last.result is None:
            return
        self.stats.last_finished_at = last.finished_at
        await self._show(last.result, last.number)

    async def _show(self, result: TickResult, number: int) -> None:
        """Make `result` the tick views and metrics show, and wake the watchers."""
        async with self._ticked:
            self.last_result = result
            self.waiting = {entry.action: entry for entry in result.waiting}
            self.stats.last_number = number
            self._ticked.notify_all()

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
        """One tick; a failure is logged and counted, and the loop goes on."""
        async with self._one_at_a_time:
            started = time.perf_counter()
            epoch = self.leadership.current()
            if epoch is None:
                epoch = await asyncio.to_thread(self.leadership.hold)
            if epoch is None:  # another replica leads
                await self.follow()
                return None
            try:
                result, applied, phases, rejected = await asyncio.to_thread(
                    self._tick_blocking, epoch
                )
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
                self.stats.last_error = f"{type(error).__name__}: {error}"
                log.exception(
                    "tick failed; retrying next period", extra={"tick": self.stats.ticks + 1}
                )
                return None
            self.stats.rejected_actions += rejected
            return await self._record(result, applied, phases, started)

    async def _record(
        self, result: TickResult, applied: AppliedTick, phases: dict[str, float], started: float
    ) -> TickResult:
        """Keep a written-back tick for metrics and watchers, and wake the watchers."""
        self.stats.rejected_actions += result.solver.rejected_actions
        self.stats.skipped_pools = result.solver.skipped_pools
        self.stats.wall_guard_hits += result.solver.wall_guard_hit
        self.stats.last_duration_s = time.perf_counter() - started
        self.stats.phases_s = phases
        self.stats.last_finished_at = datetime.now(UTC)
        self.stats.last_error = None
        self.stats.ticks += 1
        await self._show(result, applied.number)
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

    def _before_snapshot(self, epoch: int) -> None:
        """Fail scheduled and running actions whose deadline has come and stop reusable pools
        idle past their idle_timeout (their charges free up for this tick), then submit the
        runs of triggers due by now, so this tick plans them.

        A trigger's time more than two periods old (at least a second) passed while the
        service was down, or while ticks overran: the trigger's catch_up decides. Each of
        these writes commits only while this replica leads at `epoch`."""
        now = self.clock()
        self.store.expire_deadlines(now, epoch=epoch)
        self.store.stop_idle_environments(now, epoch=epoch)
        grace = timedelta(seconds=max(2 * self.period_s, 1.0))
        self.store.fire_triggers(now, grace, epoch=epoch)

    def _tick_blocking(self, epoch: int) -> tuple[TickResult, AppliedTick, dict[str, float], int]:
        self._before_snapshot(epoch)
        clock = time.perf_counter()
        planned = self.store.read_tick_input(datetime.now(UTC))
        read_s = time.perf_counter() - clock
        result = self.tick_fn(planned.snapshot)
        solve_s = time.perf_counter() - clock - read_s
        applied = self.store.apply_tick(result, planned.generation, epoch=epoch)
        write_s = time.perf_counter() - clock - read_s - solve_s
        phases = {"snapshot": read_s, "solve": solve_s, "write": write_s}
        return result, applied, phases, planned.rejected

    async def wait_for_tick(self, after: int) -> int:
        """Wait until a tick numbered past `after` has been written back (by any leader);
        return its number."""
        async with self._ticked:
            await self._ticked.wait_for(lambda: self.stats.last_number > after)
            return self.stats.last_number
