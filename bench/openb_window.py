"""A window of the openb trace on its fleet, as the replay benchmarks cut it, and the command
options that choose it (each benchmark with its own defaults)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from fixtures.generators.alibaba import replay_fleet, replay_trace, shrunk_fleet, trace_window
from models.snapshot import Snapshot
from models.trace import TraceRow


@dataclass(frozen=True)
class OpenbWindow:
    """Pods submitted from `first_day` for `days`, arriving `density` times as fast, replayed
    for `hours` on `nodes_fraction` of every pool's nodes."""

    first_day: float
    days: float
    density: float
    hours: float
    nodes_fraction: float

    def fleet(self) -> Snapshot:
        return shrunk_fleet(replay_fleet(), self.nodes_fraction)

    def rows(self) -> list[TraceRow]:
        return trace_window(replay_trace(), self.first_day, self.days, self.density)

    def described(self) -> str:
        return (
            f"openb days {self.first_day:g}-{self.first_day + self.days:g}, arrivals"
            f" x{self.density:g}, {self.hours:g} h simulated"
        )


def window_options(
    *,
    first_day: float = 148,
    days: float = 1,
    density: float = 1,
    hours: float = 24,
    nodes_fraction: float = 1.0,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The options `--first-day --days --density --hours --nodes-fraction`, with these
    defaults, given to the command as one `window: OpenbWindow`."""
    options = [
        click.option("--first-day", type=float, default=first_day, show_default=True,
                     help="Window start, in days of the trace."),
        click.option("--days", type=float, default=days, show_default=True,
                     help="Days of arrivals."),
        click.option("--density", type=float, default=density, show_default=True,
                     help="Arrivals this much faster."),
        click.option("--hours", type=float, default=hours, show_default=True,
                     help="Simulated hours replayed."),
        click.option("--nodes-fraction", type=float, default=nodes_fraction, show_default=True,
                     help="Share of every pool's nodes kept."),
    ]  # fmt: skip

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def run(
            first_day: float,
            days: float,
            density: float,
            hours: float,
            nodes_fraction: float,
            **rest: Any,
        ) -> None:
            command(OpenbWindow(first_day, days, density, hours, nodes_fraction), **rest)

        for option in reversed(options):
            run = option(run)
        return run

    return decorate
