"""Where untyped GPU work lands, and what typed work waits for it, in a replay of openb.

    .venv/bin/python -m bench.replay_devices            # the README's window, 12 h, --at 6.5

The window is the README's picture (`sluice replay convert alibaba --first-day 120 --days 29
--density 29 --nodes-fraction 0.05`, 60 s ticks, `--time-limit 5`), replayed with the engine
and with the first-fit baseline. Per variant it prints the replay's CPU seconds
(time.process_time: wall time on a shared machine is noise), the GPUs of each device model
held by untyped work at `--at` hours and at most over the replay, and per queue the waits of
the pods that started (p50, p90, max) and the minutes its head was blocked.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

import click
import numpy as np

from bench.openb_window import OpenbWindow, window_options
from models.result import TickResult
from models.snapshot import Snapshot
from models.trace import TraceRow
from solver.replay.simulate import ReplayOptions, Simulation, replay
from solver.replay.summary import summarize
from solver.tick import TickOptions


def _devices(fleet: Snapshot) -> tuple[dict[tuple[str, str], str], Counter[str]]:
    """Each pool's device model, by (cluster, pool); and the fleet's GPUs per model."""
    device_of: dict[tuple[str, str], str] = {}
    capacity: Counter[str] = Counter()
    for cluster in fleet.clusters:
        for pool in cluster.node_pools:
            if pool.node.accelerator and pool.node.accelerators:
                model = pool.node.accelerator.split("/", 1)[-1]
                device_of[(cluster.name, pool.name)] = model
                capacity[model] += pool.node.accelerators * pool.nodes
    return device_of, capacity


def _untyped_on(simulation: Simulation, device_of: dict[tuple[str, str], str]) -> Counter[str]:
    """GPUs of each device model that running untyped work holds."""
    held: Counter[str] = Counter()
    for running in simulation.running.values():
        placement = running.action.placement
        if placement is None:
            continue
        spots = {spot.name: spot.node_pool for spot in placement.containers}
        for container in running.action.containers:
            gpu = container.gpu
            if gpu is not None and gpu.device is None and container.name in spots:
                held[device_of[(placement.cluster, spots[container.name])]] += gpu.count
    return held


def _measure(
    name: str, fleet: Snapshot, rows: list[TraceRow], options: ReplayOptions, at_s: float
) -> None:
    device_of, capacity = _devices(fleet)
    at: Counter[str] = Counter()
    most: Counter[str] = Counter()
    observing = 0.0
    start = None

    def observe(simulation: Simulation, result: TickResult) -> None:
        nonlocal start, at, observing
        mark = time.process_time()
        start = start or result.now
        held = _untyped_on(simulation, device_of)
        for model, gpus in held.items():
            most[model] = max(most[model], gpus)
        if result.now - start <= timedelta(seconds=at_s):
            at = held
        observing += time.process_time() - mark

    clock = time.process_time()
    result = replay(fleet, rows, options, observe=observe)
    cpu_s = time.process_time() - clock - observing
    click.echo(f"{name}: {len(result.ticks)} ticks in {cpu_s:.1f} CPU s (without the counting)")
    click.echo(
        f"  untyped GPUs per model at {at_s / 3600:g} h (most over the replay) / GPUs: "
        + ", ".join(
            f"{model} {at[model]} ({most[model]}) / {capacity[model]}" for model in sorted(capacity)
        )
    )
    summary = summarize(result)
    click.echo(f"  {'queue':<8} {'started':>7} {'p50 min':>8} {'p90':>6} {'max':>6} {'blocked':>8}")
    for queue in [*sorted({a.queue for a in result.actions}), "(all)"]:
        waits = np.array(
            [
                a.waited_s
                for a in result.actions
                if a.started_at is not None
                and a.waited_s is not None
                and queue in ("(all)", a.queue)
            ],
            dtype=float,
        )
        blocked = summary["queues"][queue]["head_blocked_s"] / 60
        figures = (
            [np.percentile(waits, 50) / 60, np.percentile(waits, 90) / 60, waits.max() / 60]
            if waits.size
            else []
        )
        click.echo(
            f"  {queue:<8} {waits.size:>7}"
            + "".join(f" {v:>{8 if i == 0 else 6}.1f}" for i, v in enumerate(figures))
            + f" {blocked:>8.0f}"
        )


@click.command()
@window_options(first_day=120, days=29, density=29, hours=12, nodes_fraction=0.05)
@click.option("--time-limit", type=float, default=5.0, show_default=True, help="Per tick.")
@click.option("--at", "at_hours", type=float, default=6.5, show_default=True, help="Hours in.")
@click.option("--engine-only", is_flag=True, help="Skip the first-fit replay.")
def main(window: OpenbWindow, time_limit: float, at_hours: float, engine_only: bool) -> None:
    fleet, rows = window.fleet(), window.rows()
    variants = (("engine", False),) if engine_only else (("engine", False), ("first-fit", True))
    for name, first_fit in variants:
        options = ReplayOptions(
            period_s=60.0,
            until_s=window.hours * 3600,
            tick=TickOptions(time_limit_s=time_limit, first_fit=first_fit),
        )
        _measure(name, fleet, rows, options, at_hours * 3600)


if __name__ == "__main__":
    main()
