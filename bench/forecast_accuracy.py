"""How close a forecast made at submission comes to when the action really starts.

    .venv/bin/python -m bench.forecast_accuracy                          # day 148 of openb
    .venv/bin/python -m bench.forecast_accuracy --first-day 120 --days 29 --density 29 \\
        --hours 6 --nodes-fraction 0.1                                    # work that queues

Issue 15: "Measure forecast accuracy on the openb trace replay (forecast at submit against
actual start: median absolute error)". The openb trace (fixtures.generators.alibaba) replays
on its fleet, 60 s ticks, as `sluice replay` does (solver.replay.simulate). At each tick
where actions that arrived since the last tick are left waiting (every --every'th such
tick, at most --samples of them), the state after that tick is forecast
(solver.replay.forecast) twice, with run times

- given: every action's expected_duration is its true duration (what a submitter who
  knows gives), so the error comes only from work that arrives later, and
- learned: no expected_duration; the median run time of each queue's finished work so
  far (models.forecast.LearnedDurations), as the service learns it.

When the replay is over, each forecast start is compared with the start the replay gave
the action. The figures: the median and p90 of the absolute error over the forecasts with
an estimate, how many were unknown, and a forecast's CPU time (it runs once per service
tick; CPU seconds of this process, since wall time on a shared machine is noise). Everything
but the CPU time is deterministic.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import click

from bench.openb_window import OpenbWindow, window_options
from models.forecast import FinishedRun, LearnedDurations
from models.result import TickResult
from models.snapshot import Action
from models.trace import TraceRow
from solver.replay.forecast import ForecastBudget, forecast_waiting
from solver.replay.simulate import ReplayOptions, Simulation, replay
from solver.tick import TickOptions

MODES = ("given", "learned")


@dataclass
class _Sampler:
    rows: dict[str, TraceRow]
    budget: ForecastBudget
    every: int
    samples: int
    started: dict[str, datetime] = field(default_factory=dict)
    forecasts: dict[str, dict[str, datetime | None]] = field(
        default_factory=lambda: {mode: {} for mode in MODES}
    )
    cpu_s: list[float] = field(default_factory=list)
    candidates: int = 0
    last: datetime | None = None

    def observe(self, simulation: Simulation, result: TickResult) -> None:
        now, since = result.now, self.last
        self.last = now
        for scheduled in result.scheduled:
            self.started[scheduled.action] = now
        fresh = [
            action.id
            for action in simulation.queued
            if since is None or action.submitted_at > since
        ]
        if not fresh or len(self.cpu_s) >= self.samples * len(MODES):
            return
        self.candidates += 1
        if (self.candidates - 1) % self.every:
            return
        snapshot = simulation.snapshot(now)
        learned = self._learned(now)
        for mode, run_time in (("given", self._true_run_time), ("learned", learned.expected)):
            clock = time.process_time()
            state = Simulation.of(snapshot, self.budget.tick, run_time)
            found = forecast_waiting(state, now, fresh, self.budget)
            self.cpu_s.append(time.process_time() - clock)
            for action_id, estimate in found.items():
                self.forecasts[mode][action_id] = estimate.estimated_start

    def _true_run_time(self, action: Action) -> tuple[timedelta, str]:
        return timedelta(seconds=self.rows[action.id].duration_s), "its true duration"

    def _learned(self, now: datetime) -> LearnedDurations:
        finished = [
            (self.rows[action_id], started)
            for action_id, started in self.started.items()
            if started + timedelta(seconds=self.rows[action_id].duration_s) <= now
        ]
        finished.sort(key=lambda pair: pair[1], reverse=True)  # newest first
        return LearnedDurations.learn(
            FinishedRun(row.queue, None, row.duration_s) for row, _ in finished
        )


def _error_line(
    mode: str, estimates: dict[str, datetime | None], started: dict[str, datetime], end: datetime
) -> str:
    """The errors of the estimates; one the replay never reached (the action had not started
    when it stopped) counts as at least the stretch from the estimate to the replay's end."""
    errors = [
        abs((estimate - started[action_id]).total_seconds())
        for action_id, estimate in estimates.items()
        if estimate is not None and action_id in started
    ]
    beyond = [
        max((end - estimate).total_seconds(), 0.0)
        for action_id, estimate in estimates.items()
        if estimate is not None and action_id not in started
    ]
    unknown = sum(1 for estimate in estimates.values() if estimate is None)
    if not errors:
        return f"  {mode:<8} no estimates to compare ({unknown} unknown of {len(estimates)})"
    every = errors + beyond
    return (
        f"  {mode:<8} {len(errors)} compared: median |error| {statistics.median(errors):.0f} s,"
        f" p90 {_p90(errors):.0f} s, exact {sum(1 for e in errors if e == 0)}; {unknown} unknown;"
        f" {len(beyond)} not started when the replay stopped, counted too: median at least"
        f" {statistics.median(every):.0f} s, p90 at least {_p90(every):.0f} s"
    )


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]


@click.command()
@window_options()
@click.option("--every", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--samples", type=click.IntRange(min=1), default=60, show_default=True)
@click.option("--time-limit", type=float, default=1.0, show_default=True, help="Replay ticks'.")
@click.option(
    "--widening",
    type=click.IntRange(min=1),
    default=ForecastBudget.widening,
    show_default=True,
    help="Forecast ticks at each spacing before it doubles (a large number: never).",
)
def main(window: OpenbWindow, every: int, samples: int, time_limit: float, widening: int) -> None:
    fleet = window.fleet()
    rows = {row.id: row for row in window.rows()}
    budget = ForecastBudget(period_s=60.0, widening=widening)
    sampler = _Sampler(rows, budget, every, samples)
    options = ReplayOptions(
        period_s=60.0, until_s=window.hours * 3600, tick=TickOptions(time_limit_s=time_limit)
    )
    nodes = sum(pool.nodes for cluster in fleet.clusters for pool in cluster.node_pools)
    click.echo(
        f"{window.described()}, {len(rows)} pods, {nodes} nodes"
        f" ({window.nodes_fraction:g} of the fleet);"
        f" forecasts: {budget.ticks} ticks, {budget.period_s:g} s grid widening every"
        f" {budget.widening},"
        f" time limit {budget.tick.time_limit_s:g} per tick"
    )
    clock = time.process_time()
    result = replay(fleet, list(rows.values()), options, observe=sampler.observe)
    click.echo(
        f"replay: {len(result.ticks)} ticks in {time.process_time() - clock:.1f} CPU s (forecasts"
        f" included); {sampler.candidates} ticks left fresh arrivals waiting,"
        f" {len(sampler.cpu_s) // len(MODES)} forecast"
    )
    started = {a.id: a.started_at for a in result.actions if a.started_at is not None}
    for mode in MODES:
        click.echo(_error_line(mode, sampler.forecasts[mode], started, result.end))
    if sampler.cpu_s:
        click.echo(
            f"  a forecast's CPU time: median {statistics.median(sampler.cpu_s):.2f} s,"
            f" most {max(sampler.cpu_s):.2f} s"
        )


if __name__ == "__main__":
    main()
