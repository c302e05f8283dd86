"""Simulated ticks per minute of `sluice replay` on a window of the openb trace.

    .venv/bin/python -m bench.replay_speed                                   # day 148, 24 h
    .venv/bin/python -m bench.replay_speed --first-day 120 --days 29 --density 200 --hours 6

Issue 15: "Speed: at least 1,000 simulated ticks per minute for a fleet of the openb size on
2 cores (measure and state it)". The window is made as `sluice replay convert alibaba
--first-day --days --density --nodes-fraction` makes it, and replayed with 60 s ticks as
`sluice replay` does, with the engine and then with the first-fit baseline (`--first-fit`).
The rate counts CPU seconds of this process (time.process_time), not wall time, which on a
shared machine is noise; the split is the engine's own phase timer, summed over the ticks.
"""

from __future__ import annotations

import time
from collections import Counter

import click

from bench.openb_window import OpenbWindow, window_options
from models.result import TickResult
from models.snapshot import Snapshot
from models.trace import TraceRow
from solver.replay.simulate import ReplayOptions, Simulation, replay
from solver.tick import TickOptions


def _measure(name: str, fleet: Snapshot, rows: list[TraceRow], options: ReplayOptions) -> float:
    """Replay, print the figures, and return the simulated ticks per CPU minute."""
    phases: Counter[str] = Counter()
    most_running = 0

    def observe(simulation: Simulation, result: TickResult) -> None:
        nonlocal most_running
        phases.update(result.solver.phases_s)
        most_running = max(most_running, len(simulation.running))

    clock = time.process_time()
    result = replay(fleet, rows, options, observe=observe)
    cpu_s = time.process_time() - clock
    rate = len(result.ticks) / cpu_s * 60
    # The phases are wall times: shown as shares of the ticks' own time, not of the CPU's.
    ticked = sum(v for k, v in phases.items() if k not in ("model_build", "model_solve"))
    split = ", ".join(
        f"{phase} {100 * seconds / ticked:.0f}%"
        for phase, seconds in phases.most_common()
        if seconds / ticked >= 0.01
    )
    click.echo(
        f"  {name:<9} {len(result.ticks)} ticks in {cpu_s:.1f} CPU s: {rate:,.0f} simulated"
        f" ticks per CPU minute; most running at once {most_running}; the ticks' time: {split}"
    )
    return rate


@click.command()
@window_options()
@click.option("--time-limit", type=float, default=5.0, show_default=True, help="Per tick.")
def main(window: OpenbWindow, time_limit: float) -> None:
    fleet, rows = window.fleet(), window.rows()
    nodes = sum(pool.nodes for cluster in fleet.clusters for pool in cluster.node_pools)
    click.echo(
        f"{window.described()}, {len(rows)} pods, {nodes} nodes; 60 s ticks,"
        f" time limit {time_limit:g}"
    )
    rates = {}
    for name, first_fit in (("engine", False), ("first-fit", True)):
        options = ReplayOptions(
            period_s=60.0,
            until_s=window.hours * 3600,
            tick=TickOptions(time_limit_s=time_limit, first_fit=first_fit),
        )
        rates[name] = _measure(name, fleet, rows, options)
    click.echo(f"  first-fit / engine rate: {rates['first-fit'] / rates['engine']:.2f}")


if __name__ == "__main__":
    main()
