"""`sluice replay`: run a trace of work through the real engine on simulated time.

    sluice replay TRACE --fleet SCENARIO_OR_SNAPSHOT [--period 60s | --event-driven]
        [--until T] [--time-limit S] [--report] --out DIR
    sluice replay convert alibaba|csv SOURCE --out trace.arrow

TRACE is a replay trace (docs/replay.md; Arrow, Parquet or CSV). The output directory
gets replay_actions.arrow, replay_ticks.arrow, summary.json, summary.txt and, with
--report, report.png; it appears whole or not at all (api.cli.whatif.staged).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from api.cli.whatif import TIME_LIMIT, _check_free, _WhatifGroup, staged
from models.errors import InvalidInput
from models.fields import parse_duration

REPORT_INSTALL = "pip install 'sluice[report]'  (or, in a checkout: pip install -e '.[report]')"


def _seconds(text: str | None, option: str) -> float | None:
    return None if text is None else parse_duration(text, option).total_seconds()


@click.group("replay", cls=_WhatifGroup)
def replay_group() -> None:
    """Replay a trace of work through the engine on simulated time.

    `sluice replay TRACE --fleet FLEET --out DIR` runs one replay (`replay run`);
    `sluice replay convert alibaba|csv ...` makes a trace from a public format.
    """


@replay_group.command("run")
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--fleet",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="The starting fleet and queue settings: a scenario file or an Arrow snapshot (its"
    " actions are not replayed).",
)
@click.option(
    "--period",
    default="60s",
    show_default=True,
    help="Simulated time between ticks (60s, 5m, 1h).",
)
@click.option(
    "--event-driven",
    is_flag=True,
    help="Tick at each batch of arrivals, ends and expiries instead of every --period.",
)
@click.option("--until", help="Stop at this much simulated time from the trace start (12h).")
@TIME_LIMIT
@click.option("--report", is_flag=True, help="Also draw report.png (needs the `report` extra).")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Directory for the tables (Arrow IPC), summary.json and summary.txt.",
)
def replay_command(
    trace: Path,
    fleet: Path,
    period: str,
    event_driven: bool,
    until: str | None,
    time_limit: float,
    report: bool,
    out: Path,
) -> None:
    """Replay TRACE on the fleet, tick by tick, and write what happened."""
    from models.arrow.tables import write_tables
    from models.arrow.trace import read_trace
    from solver import TickOptions
    from solver.replay.simulate import ReplayOptions, check_trace, replay
    from solver.replay.summary import replay_tables, summarize, summary_text
    from solver.whatif.compare import load_snapshot

    _check_free(out)
    if report:
        _require_matplotlib()
    period_s = _seconds(period, "--period") or 0.0
    if period_s <= 0:
        raise InvalidInput(f"--period {period}: give a positive period", field="period")
    options = ReplayOptions(
        period_s=period_s,
        event_driven=event_driven,
        until_s=_seconds(until, "--until"),
        tick=TickOptions(time_limit_s=time_limit),
    )
    rows = read_trace(trace)
    start = load_snapshot(fleet)
    check_trace(start, rows)  # before the progress bar, so a refusal is the only output
    with click.progressbar(length=1000, label="replaying", file=sys.stderr) as bar:

        def advance(fraction: float) -> None:
            bar.update(int(fraction * 1000) - bar.pos)

        result = replay(start, rows, options, advance)
    summary = summarize(result)
    text = summary_text(summary)
    with staged(out) as target:
        write_tables(replay_tables(result), target)
        (target / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (target / "summary.txt").write_text(text)
        if report:
            from solver.replay.picture import draw_report

            draw_report(
                result, f"sluice replay {trace.name} on {fleet.name}", target / "report.png"
            )
    click.echo(text, nl=False)


@replay_group.group("convert")
def convert_group() -> None:
    """Make a replay trace from a public trace format."""


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InvalidInput(
            f"--report draws with matplotlib, which is not installed: {REPORT_INSTALL}"
        ) from None
