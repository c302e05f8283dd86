"""Replay a trace through simulated time with the real engine (solver.tick), tick by tick.

Each tick sees what a service's tick would: the actions submitted by then, in arrival
order, and the running ones with their placements. Running work ends its duration after
its start (or at its deadline, failing DEADLINE_EXCEEDED, as the service stops running
work whose deadline has come); the room it held is free at the first tick after that.
The engine itself fails queued work past max_queued_time or its deadline.

Ticks come every `period` of simulated time, or, event-driven, at each batch of
arrivals, ends and expiries. Either way a stretch with nothing queued or running is
skipped to the next arrival (on the period's grid), so an idle night costs no ticks.
Nothing reads the wall clock: the same trace and options give the same tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from models.errors import InvalidInput
from models.result import TickResult
from models.snapshot import Action, ActionState, Container, Snapshot
from models.trace import TraceRow
from solver.placement.problem import CompileCache
from solver.tick import TickOptions, tick

SUCCEEDED = "succeeded"
STILL_RUNNING = "running"
STILL_QUEUED = "queued"
NOT_ARRIVED = "not_arrived"  # submitted after the replay stopped (--until)


@dataclass(frozen=True)
class ReplayOptions:
    period_s: float = 60.0
    event_driven: bool = False
    until_s: float | None = None  # simulated seconds from the trace start; None: until done
    tick: TickOptions = field(default_factory=TickOptions)


@dataclass
class ActionRecord:
    id: str
    queue: str
    submitted_at: datetime
    duration_s: float
    started_at: datetime | None = None
    finished_at: datetime | None = None
    outcome: str = NOT_ARRIVED

    @property
    def waited_s(self) -> float | None:
        ended_waiting = self.started_at or (
            self.finished_at if self.outcome not in (SUCCEEDED, STILL_RUNNING) else None
        )
        return (
            None if ended_waiting is None else (ended_waiting - self.submitted_at).total_seconds()
        )


@dataclass(frozen=True)
class TickRecord:
    time: datetime
    queued: int
    running: int
    started: int
    failed: int
    gpu_allocated: int
    cpu_allocated: int
    head_blocked: tuple[str, ...]
    queue_gpus: dict[str, int]  # GPUs held per queue (those holding any), for the report


@dataclass
class Replay:
    start: datetime
    actions: list[ActionRecord]
    ticks: list[TickRecord]
    gpu_capacity: int
    cpu_capacity: int
    end: datetime  # the simulated time the replay stopped


@dataclass
class Running:
    action: Action
    ends_at: datetime | None  # None: no expected end (a forecast's work of unknown run time)
    outcome: str
    basis: str = ""  # where the run time came from, for a forecast's words


RunTime = Callable[[Action], tuple[timedelta | None, str]]
"""An action's run time once started (None: not known), and where it comes from."""


class Simulation:
    """What a tick leaves for the next: queued work in arrival order, running work with its
    end, reusable pools and the queues' head_blocked_since. A replay drives it over a trace,
    a forecast over the running work's expected ends."""

    def __init__(
        self,
        fleet: Snapshot,
        options: TickOptions,
        run_time: RunTime,
        compiled: CompileCache | None = None,
    ) -> None:
        self.fleet = fleet
        self.options = options
        self.run_time = run_time
        self.environments = {env.name: env for env in fleet.environments}
        self.queued: list[Action] = []
        self.running: dict[str, Running] = {}
        # Running work is compiled once, when it starts; a cache given is one an earlier
        # simulation of the same line filled (the service's forecasts, D451).
        self.compiled = compiled or CompileCache()

    @classmethod
    def of(
        cls,
        snapshot: Snapshot,
        options: TickOptions,
        run_time: RunTime,
        compiled: CompileCache | None = None,
    ) -> Simulation:
        """The snapshot's state: its queued actions in line, its running ones ending their
        `run_time` after their started_at (no end without either; see running_until for
        work already past it)."""
        simulation = cls(snapshot, options, run_time, compiled)
        for action in snapshot.actions:
            if action.state is ActionState.QUEUED:
                simulation.queued.append(action)
            else:
                run, basis = run_time(action)
                simulation.running[action.id] = running_until(action, run, basis, snapshot.now)
        return simulation

    def snapshot(self, now: datetime) -> Snapshot:
        """The state as a tick at `now` sees it."""
        return self.fleet.model_copy(
            update={
                "now": now,
                "actions": [r.action for r in self.running.values()] + self.queued,
                "environments": list(self.environments.values()),
            }
        )

    def end_due(self, now: datetime) -> list[Running]:
        """Take out the running work whose end has come by `now`."""
        due = [r for r in self.running.values() if r.ends_at is not None and r.ends_at <= now]
        for item in due:
            del self.running[item.action.id]
        return due

    def tick(self, now: datetime) -> TickResult:
        result = tick(self.snapshot(now), self.options, self.compiled)
        self.apply(result)
        return result

    def apply(self, result: TickResult) -> None:
        """Carry a tick's decisions: started work runs until its run time (or deadline) is up,
        failed work leaves the line."""
        now = result.now
        self.fleet = self.fleet.model_copy(update={"queues": _carried_queues(self.fleet, result)})
        for started in result.environments_started:
            self.environments[started.environment] = self.environments[
                started.environment
            ].model_copy(update={"running": True, "placement": started.placement()})
        by_id = {action.id: action for action in self.queued}
        for scheduled in result.scheduled:
            action = by_id[scheduled.action]
            run_time, basis = self.run_time(action)
            placed = action.model_copy(
                update={
                    "state": ActionState.RUNNING,
                    "placement": scheduled.placement(),
                    "started_at": now,
                }
            )
            self.running[action.id] = running_until(placed, run_time, basis)
        done = {f.action for f in result.failed} | {s.action for s in result.scheduled}
        self.queued = [action for action in self.queued if action.id not in done]


def running_until(
    action: Action, run_time: timedelta | None, basis: str, now: datetime | None = None
) -> Running:
    """Running work that ends its run time after its start, or fails at its deadline if that
    comes first (as the service stops running work whose deadline has come). Work already
    past its end by `now` is expected to run as long again as it has run: run times are
    heavy-tailed, and the longer work has run the longer it tends to go on."""
    start = action.started_at
    ends_at = None if run_time is None or start is None else start + run_time
    if ends_at is not None and start is not None and now is not None and ends_at < now:
        ends_at, basis = now + (now - start), f"{basis}, overrun: as long again as it has run"
    deadline = action.deadline_at()
    if deadline is not None and (ends_at is None or deadline < ends_at):
        return Running(action, deadline, "DEADLINE_EXCEEDED", "its deadline")
    return Running(action, ends_at, SUCCEEDED, basis)


def replay(
    fleet: Snapshot,
    trace: Sequence[TraceRow],
    options: ReplayOptions | None = None,
    progress: Callable[[float], None] | None = None,
    observe: Callable[[Simulation, TickResult], None] | None = None,
) -> Replay:
    """Run `trace` on `fleet`'s queues, clusters and environments (its own actions are not
    part of the replay). `progress` hears the fraction of the trace's actions settled;
    `observe` sees the state after each tick (a forecast's accuracy is measured so)."""
    options = options or ReplayOptions()
    if not options.event_driven and not (0 < options.period_s < math.inf):
        raise InvalidInput(f"period {options.period_s}s: give a positive period", field="period")
    check_against_fleet(fleet, trace)
    start = _trace_start(fleet, trace)
    arrivals = sorted(
        ((row.action(start), row.duration_s) for row in trace),
        key=lambda pair: pair[0].submitted_at,
    )  # stable: rows submitted together keep the trace's order
    records = {
        action.id: ActionRecord(action.id, action.queue, action.submitted_at, duration)
        for action, duration in arrivals
    }
    stop = None if options.until_s is None else start + timedelta(seconds=options.until_s)
    gpu_capacity, cpu_capacity = _capacity(fleet)

    def trace_duration(action: Action) -> tuple[timedelta, str]:
        return timedelta(seconds=records[action.id].duration_s), "the trace"

    simulation = Simulation(fleet, options.tick, trace_duration)
    ticks: list[TickRecord] = []
    settled = 0
    next_arrival = 0
    now = start
    while next_arrival < len(arrivals) or simulation.queued or simulation.running:
        if stop is not None and now > stop:
            break
        for item in simulation.end_due(now):
            records[item.action.id].finished_at = item.ends_at
            records[item.action.id].outcome = item.outcome
            settled += 1
        while next_arrival < len(arrivals) and arrivals[next_arrival][0].submitted_at <= now:
            simulation.queued.append(arrivals[next_arrival][0])
            records[arrivals[next_arrival][0].id].outcome = STILL_QUEUED
            next_arrival += 1
        result = simulation.tick(now)
        for scheduled in result.scheduled:
            records[scheduled.action].started_at = now
            records[scheduled.action].outcome = STILL_RUNNING
        for failed in result.failed:
            record = records[failed.action]
            record.finished_at = now
            record.outcome = failed.code.value
            settled += 1
        ticks.append(_tick_record(now, result, simulation))
        if observe is not None:
            observe(simulation, result)
        if progress is not None:
            progress(settled / max(len(arrivals), 1))
        if _stuck(result, simulation, next_arrival == len(arrivals)):
            break
        now = _next_tick(now, start, options, arrivals, next_arrival, simulation)
    return Replay(start, list(records.values()), ticks, gpu_capacity, cpu_capacity, now)


def check_against_fleet(fleet: Snapshot, trace: Sequence[TraceRow]) -> None:
    """Every row's queue and environment exist in the fleet (row numbers as in the file)."""
    queues = {queue.name for queue in fleet.queues}
    environments = {env.name: env.queue for env in fleet.environments}
    for index, row in enumerate(trace):
        if row.queue not in queues:
            raise InvalidInput(f"trace row {index}: unknown queue {row.queue!r}", field="queue")
        if row.environment is not None and environments.get(row.environment) != row.queue:
            raise InvalidInput(
                f"trace row {index}: queue {row.queue} has no environment {row.environment!r}",
                field="environment",
            )


def _trace_start(fleet: Snapshot, trace: Sequence[TraceRow]) -> datetime:
    """`submit_s` counts from the fleet's `now`; timestamps start at the earliest one."""
    stamps = [row.submitted_at for row in trace if row.submitted_at is not None]
    return min(stamps) if stamps else fleet.now


def _capacity(fleet: Snapshot) -> tuple[int, int]:
    pools = [pool for cluster in fleet.clusters for pool in cluster.node_pools]
    return (
        sum(pool.node.accelerators * pool.full_scale for pool in pools),
        sum(pool.node.cpu * pool.full_scale for pool in pools),
    )


def _carried_queues(fleet: Snapshot, result: TickResult) -> list[object]:
    """Each queue's head_blocked_since, carried to the next tick as the service carries it."""
    return [
        queue.model_copy(
            update={"head_blocked_since": result.queues[queue.name].head_blocked_since}
        )
        if queue.name in result.queues
        else queue
        for queue in fleet.queues
    ]


def _held(containers: Sequence[Container]) -> tuple[int, int]:
    gpus = sum(c.gpu.count for c in containers if c.gpu is not None)
    return gpus, sum(c.resources.get("cpu", 0) for c in containers)


def _tick_record(now: datetime, result: TickResult, simulation: Simulation) -> TickRecord:
    held = [(r.action.queue, _held(r.action.containers)) for r in simulation.running.values()]
    held += [
        (env.queue, _held(env.replica_containers()))
        for env in simulation.environments.values()
        if env.running
    ]
    queue_gpus: dict[str, int] = {}
    for queue, (gpus, _) in held:
        if gpus:
            queue_gpus[queue] = queue_gpus.get(queue, 0) + gpus
    return TickRecord(
        time=now,
        queued=len(simulation.queued),
        running=len(simulation.running),
        started=len(result.scheduled),
        failed=len(result.failed),
        gpu_allocated=sum(gpus for _, (gpus, _) in held),
        cpu_allocated=sum(cpus for _, (_, cpus) in held),
        head_blocked=tuple(sorted(name for name, q in result.queues.items() if q.head_blocked)),
        queue_gpus=dict(sorted(queue_gpus.items())),
    )


def _next_tick(
    now: datetime,
    start: datetime,
    options: ReplayOptions,
    arrivals: list[tuple[Action, float]],
    next_arrival: int,
    simulation: Simulation,
) -> datetime:
    arrival = arrivals[next_arrival][0].submitted_at if next_arrival < len(arrivals) else None
    if options.event_driven:
        events = due_events(simulation)
        if arrival is not None:
            events.append(arrival)
        later = [t for t in events if t > now]
        # Waiting work with nothing due to change still gets a tick when time moves on.
        return min(later) if later else now + timedelta(seconds=options.period_s)
    period = timedelta(seconds=options.period_s)
    following = now + period
    idle = not simulation.queued and not simulation.running
    if idle and arrival is not None and arrival > following:
        steps = math.ceil((arrival - start) / period)
        return start + steps * period
    return following


def due_events(simulation: Simulation) -> list[datetime]:
    """The known times the state changes with nothing arriving: ends and expiries."""
    events = [r.ends_at for r in simulation.running.values() if r.ends_at is not None]
    return events + [t for a in simulation.queued if (t := _expiry(a)) is not None]


def _stuck(result: TickResult, simulation: Simulation, all_arrived: bool) -> bool:
    """Waiting work that nothing can ever change: no arrival, no end, no expiry to come."""
    return (
        all_arrived
        and not simulation.running
        and not result.scheduled
        and not result.environments_started
        and all(_expiry(action) is None for action in simulation.queued)
    )


def _expiry(action: Action) -> datetime | None:
    times = [action.deadline_at()]
    if action.max_queued_time is not None:
        times.append(action.submitted_at + action.max_queued_time)
    known = [t for t in times if t is not None]
    return min(known) if known else None
