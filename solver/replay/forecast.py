"""When each waiting action starts, by replaying forward from a tick with nothing arriving.

The state after a tick (its snapshot with its decisions applied) runs on through the
replay's simulator: running work ends at its expected end (started_at plus its
expected_duration, given or learned, see models.forecast.LearnedDurations), work the
simulation starts runs its own expected run time, and ticks come at each batch of ends
and expiries, on the service's period grid, widening as they go (ForecastBudget.widening).
A waiting action's estimate is the simulated tick that starts it. It is "unknown" (None,
with why) when it is still waiting once every known end has come while work without an
expected end still runs, when it would fail first, or when the budget runs out.

The budget is deterministic: at most `ticks` simulated ticks within `horizon` of
simulated time and `work` actions summed over their snapshots, each solved under the
engine's counted work limit (`tick.time_limit_s`, see solver.tick.TickOptions), so the
cost per service tick is bounded and the same state gives the same forecasts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from models.fields import format_duration
from models.forecast import LearnedDurations, StartForecast
from models.result import TickResult
from models.snapshot import Action, Snapshot
from solver.placement.problem import CompileCache
from solver.replay.simulate import Running, Simulation, due_events
from solver.tick import TickOptions

SHOWN_IDS = 3  # ids an assumption names before "and N more"


@dataclass(frozen=True)
class ForecastBudget:
    ticks: int = 24  # simulated ticks at most
    horizon: timedelta = timedelta(days=7)  # simulated time at most
    # Actions (queued and running) summed over the simulated ticks' snapshots at most: a
    # tick's cost grows with its snapshot, so a long line gets fewer simulated ticks.
    work: int = 24_000
    period_s: float = 60.0  # the service's tick period: the grid simulated ticks fall on
    # Simulated ticks at each spacing before it doubles: the first `widening` at least one
    # period apart, the next two periods, then four, ... (D182), so the ticks reach hours
    # ahead of a line whose running work ends every minute.
    widening: int = 4
    # A forecast tick solves with a smaller counted limit than the service's own tick.
    tick: TickOptions = field(default_factory=lambda: TickOptions(time_limit_s=0.25))


def forecast(
    snapshot: Snapshot,
    result: TickResult,
    learned: LearnedDurations,
    budget: ForecastBudget | None = None,
    compiled: CompileCache | None = None,
) -> dict[str, StartForecast]:
    """A forecast for every action `result` left waiting, by id; its simulated ticks compile
    with `compiled` when given (solver.placement.problem.CompileCache)."""
    budget = budget or ForecastBudget()
    simulation = Simulation.of(snapshot, budget.tick, learned.expected, compiled)
    simulation.apply(result)
    return forecast_waiting(simulation, snapshot.now, [w.action for w in result.waiting], budget)


def forecast_waiting(
    simulation: Simulation, now: datetime, waiting: Iterable[str], budget: ForecastBudget
) -> dict[str, StartForecast]:
    """Run `simulation` (the state after the tick at `now`) on with nothing arriving, until
    each of the `waiting` actions starts or fails, or the budget is spent."""
    pending = set(waiting)
    forecasts: dict[str, StartForecast] = {}
    period = timedelta(seconds=budget.period_s)
    ticks, work, at = 0, 0, now
    while pending and ticks < budget.ticks:
        spacing = period * 2 ** (ticks // budget.widening)
        following = _next_time(simulation, now, at, spacing, first=ticks == 0)
        if following is None or following > now + budget.horizon:
            break
        work += len(simulation.queued) + len(simulation.running)
        if work > budget.work:
            break
        at = following
        ended = simulation.end_due(at)
        unknown_ends = _without_end(simulation)  # what the tick's starts wait beside
        ticked = simulation.tick(at)
        ticks += 1
        for scheduled in ticked.scheduled:
            if scheduled.action in pending:
                pending.discard(scheduled.action)
                words = _started_words(ended, unknown_ends, spacing if spacing > period else None)
                forecasts[scheduled.action] = StartForecast(
                    action=scheduled.action, estimated_start=at, assumption=words
                )
        for failed in ticked.failed:
            if failed.action in pending:
                pending.discard(failed.action)
                forecasts[failed.action] = StartForecast(
                    action=failed.action,
                    estimated_start=None,
                    assumption=f"unknown: expected to fail {failed.code.value} at"
                    f" {at.isoformat()} before it starts ({failed.message})",
                )
    if pending:
        stopped = _stopped_words(simulation, ticks, work > budget.work, budget, at)
        for action_id in sorted(pending):
            forecasts[action_id] = StartForecast(
                action=action_id, estimated_start=None, assumption=stopped
            )
    return forecasts


def _without_end(simulation: Simulation) -> list[Action]:
    return [r.action for r in simulation.running.values() if r.ends_at is None]


def _next_time(
    simulation: Simulation, now: datetime, at: datetime, spacing: timedelta, first: bool
) -> datetime | None:
    """The next simulated tick: on the grid of `spacing` from `at` (a whole number of
    periods from `now`), at the first end or expiry after `at`. The first comes one spacing
    on even with nothing due, as the service's next tick would (work a tick's limit left
    waiting may start then)."""
    if first:
        return now + spacing
    later = [t for t in due_events(simulation) if t > at]
    if not later:
        return None
    return at + math.ceil((min(later) - at) / spacing) * spacing


def _ids(actions: list[str]) -> str:
    shown = ", ".join(actions[:SHOWN_IDS])
    more = len(actions) - SHOWN_IDS
    return shown if more <= 0 else f"{shown} and {more} more"


def _started_words(
    ended: list[Running], unknown_ends: list[Action], spacing: timedelta | None
) -> str:
    if ended:
        # The last to end is the one it waited for.
        last = max(ended, key=lambda r: (r.ends_at or datetime.min, r.action.id))
        assert last.ends_at is not None  # only work with an end is due
        why = (
            f"once {_ids(sorted(r.action.id for r in ended))} end (the last at"
            f" {last.ends_at.isoformat()}, from {last.basis})"
        )
    else:
        why = "at the next tick, with nothing having to end first"
    words = f"starts {why}, if running work ends when expected and nothing new arrives"
    if spacing is not None:
        words += (
            f"; simulated ticks are {format_duration(spacing)} apart this far ahead, so it may"
            " start up to that much sooner"
        )
    if unknown_ends:
        words += (
            f"; {len(unknown_ends)} running actions with no expected end"
            f" ({_ids([a.id for a in unknown_ends])}) are assumed to keep running"
        )
    return words


def _stopped_words(
    simulation: Simulation, ticks: int, out_of_work: bool, budget: ForecastBudget, at: datetime
) -> str:
    if out_of_work or ticks >= budget.ticks or due_events(simulation):
        return (
            f"unknown: not started within the forecast's budget ({ticks} simulated ticks,"
            f" to {at.isoformat()}; at most {budget.ticks} ticks, {budget.work:,} actions"
            f" over their snapshots and {format_duration(budget.horizon)})"
        )
    unknown_ends = _without_end(simulation)
    if unknown_ends:
        return (
            "unknown: still waiting once every running action with an expected end has ended;"
            f" it waits on work with no expected end ({_ids([a.id for a in unknown_ends])})"
        )
    return "unknown: nothing running or due to expire would let it start"
