"""`sluice bench` / `python -m bench`: the engine against first-fit on every scenario."""

from __future__ import annotations

from pathlib import Path

import click

from bench.report import RESULTS, run
from fixtures.generators import SCENARIOS

DEFAULT = ("m", "fragmentation", "alibaba-cold", "alibaba-steady")
"""What `python -m bench` runs without --scenario (L takes minutes: ask for it)."""


@click.command("bench")
@click.option(
    "--scenario",
    "-s",
    "scenarios",
    multiple=True,
    type=click.Choice([*SCENARIOS, "all"]),
    help=f"repeatable; default: {', '.join(DEFAULT)}; `all` adds l",
)
@click.option("--ticks", default=5, show_default=True, type=click.IntRange(1), help="per scenario")
@click.option(
    "--time-limit",
    "time_limit_s",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="the engine's TickOptions.time_limit_s, seconds",
)
@click.option(
    "--json",
    "json_path",
    default=RESULTS / "latest.json",
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="where to write the results (JSON)",
)
@click.option("--profile", is_flag=True, help="cProfile one more tick per scenario (.prof files)")
def bench(
    scenarios: tuple[str, ...], ticks: int, time_limit_s: float, json_path: Path, profile: bool
) -> None:
    """Benchmark the tick engine against a first-fit baseline, side by side."""
    chosen = list(SCENARIOS) if "all" in scenarios else list(dict.fromkeys(scenarios or DEFAULT))
    run(chosen, ticks, time_limit_s, json_path, profile, click.echo)
