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
from dataclasses import replace
from pathlib import Path

import click

from api.cli.context import FiniteRange
from api.cli.whatif import TIME_LIMIT, _check_free, _WhatifGroup, staged
from models.errors import InvalidInput
from models.fields import parse_duration

BASELINE = "baseline"
VARIANT = "variant"
MAX_TRACE_DAYS = 366.0  # the openb trace spans 149 days
MAX_DENSITY = 10_000.0
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
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="PATH=VALUE",
    help="Change the fleet as `sluice whatif --set` does (queue.NAME.FIELD=VALUE, ...).",
)
@click.option(
    "--drop",
    "drops",
    multiple=True,
    nargs=2,
    metavar="KIND NAME",
    help="Lose capacity as `sluice whatif --drop` does: `cluster NAME` or `node_pool C/P`.",
)
@click.option(
    "--first-fit",
    is_flag=True,
    help="Tick with the first-fit baseline instead of the engine: each container on the first"
    " node with room, in one walk of the line, nothing reconsidered.",
)
@click.option(
    "--compare",
    is_flag=True,
    help="Replay the fleet as given and as changed by --set/--drop/--first-fit, side by side:"
    " DIR/baseline/ and DIR/variant/ tables, both summaries and one report.",
)
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
    sets: tuple[str, ...],
    drops: tuple[tuple[str, str], ...],
    first_fit: bool,
    compare: bool,
    time_limit: float,
    report: bool,
    out: Path,
) -> None:
    """Replay TRACE on the fleet, tick by tick, and write what happened."""
    from models.arrow.tables import write_tables
    from models.arrow.trace import read_trace
    from solver import TickOptions
    from solver.replay.simulate import ReplayOptions, check_against_fleet, replay
    from solver.replay.summary import replay_tables, summarize, summary_text
    from solver.whatif.compare import apply_changes, load_snapshot, parse_changes

    _check_free(out)
    if compare and not (sets or drops or first_fit):
        raise InvalidInput(
            "--compare needs at least one --set, --drop or --first-fit", field="compare"
        )
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
    changed_options = replace(options, tick=replace(options.tick, first_fit=first_fit))
    rows = read_trace(trace)
    start = load_snapshot(fleet)
    changes = parse_changes(sets, drops)
    variants = {BASELINE: (start, options)} if compare or not (changes or first_fit) else {}
    if changes or first_fit:
        changed = apply_changes(start, changes) if changes else start
        variants[VARIANT if compare else BASELINE] = (changed, changed_options)
    for snapshot, _ in variants.values():
        check_against_fleet(snapshot, rows)  # before the progress bar: a refusal is all output
    results = {}
    for name, (snapshot, replay_options) in variants.items():
        label = f"replaying {name}" if len(variants) > 1 else "replaying"
        with click.progressbar(length=1000, label=label, file=sys.stderr) as bar:

            def advance(fraction: float) -> None:
                bar.update(int(fraction * 1000) - bar.pos)

            results[name] = replay(snapshot, rows, replay_options, advance)
    described = "; ".join([change.text for change in changes] + ["first-fit"] * first_fit)
    summaries = {name: summarize(result) for name, result in results.items()}
    texts = {name: summary_text(summary) for name, summary in summaries.items()}
    if len(results) > 1:
        text = "".join(
            f"== {name}{f' ({described})' if name == VARIANT else ''}\n{body}\n"
            for name, body in texts.items()
        )
    else:
        text = texts[BASELINE]
    with staged(out) as target:
        if len(results) > 1:
            for name, result in results.items():
                write_tables(replay_tables(result), target / name)
            written: object = summaries
        else:
            write_tables(replay_tables(results[BASELINE]), target)
            written = summaries[BASELINE]
        (target / "summary.json").write_text(json.dumps(written, indent=2) + "\n")
        (target / "summary.txt").write_text(text)
        if report:
            from solver.replay.picture import draw_report

            title = f"sluice replay {trace.name} on {fleet.name}"
            if described and not compare:
                title += f" ({described})"
            as_given = "Sluice's engine" if first_fit else "the fleet as given"
            labels = {BASELINE: f"baseline: {as_given}", VARIANT: f"variant: {described}"}
            named = {labels[name]: result for name, result in results.items()}
            draw_report(named, title, target / "report.png")
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


@convert_group.command("alibaba")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="The trace to write (NAME.arrow).",
)
@click.option(
    "--fleet-out",
    type=click.Path(path_type=Path),
    help="Also write the trace's fleet and queues as an Arrow snapshot directory (--fleet).",
)
@click.option(
    "--first-day",
    type=FiniteRange(min=0, max=MAX_TRACE_DAYS),
    default=0,
    show_default=True,
    help="Keep the pods created from this day of the trace on; the trace starts there.",
)
@click.option(
    "--days",
    type=FiniteRange(min=0, min_open=True, max=MAX_TRACE_DAYS),
    help="Keep this many days of pods from --first-day (default: to the end).",
)
@click.option(
    "--density",
    type=FiniteRange(min=0, min_open=True, max=MAX_DENSITY),
    default=1,
    show_default=True,
    help="Arrivals this many times as fast (submit times divided by it; run times kept).",
)
@click.option(
    "--nodes-fraction",
    type=FiniteRange(min=0, min_open=True, max=1),
    default=1,
    show_default=True,
    help="The --fleet-out fleet with this share of each pool's nodes (at least one).",
)
def convert_alibaba(
    out: Path,
    fleet_out: Path | None,
    first_day: float,
    days: float | None,
    density: float,
    nodes_fraction: float,
) -> None:
    """The Alibaba GPU trace's openb pods (found as the benchmark finds them: $SLUICE_DATA)."""
    from fixtures.generators.alibaba import replay_fleet, replay_trace, shrunk_fleet, trace_window
    from models.arrow.tables import write_snapshot
    from models.arrow.trace import write_trace

    _check_free(out)
    if fleet_out is not None:
        _check_free(fleet_out)
    rows = trace_window(replay_trace(), first_day, days, density)
    if not rows:
        raise InvalidInput(f"no pods created in the window from day {first_day:g}", field="days")
    with staged(out) as target:
        write_trace(rows, target)
    if fleet_out is not None:
        with staged(fleet_out) as target:
            write_snapshot(shrunk_fleet(replay_fleet(), nodes_fraction), target)
    click.echo(f"{len(rows)} actions -> {out}")


@convert_group.command("csv")
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True, help="NAME.arrow.")
@click.option("--submit", default="submit", show_default=True, help="Submit time column.")
@click.option("--duration", default="duration", show_default=True, help="Duration column.")
@click.option("--gpus", default="gpus", show_default=True, help="GPU column ('' for none).")
@click.option("--cpus", default="cpus", show_default=True, help="CPU column ('' for none).")
@click.option("--memory", default="memory", show_default=True, help="Memory column ('' none).")
@click.option("--queue", default="queue", show_default=True, help="Queue (or user) column.")
@click.option("--id", "id_column", help="Job id column; without it jobs are job-<row>.")
@click.option(
    "--memory-unit",
    default="Gi",
    show_default=True,
    help="Unit of a bare memory number (Gi, Mi, G, ...).",
)
def convert_csv(
    source: Path,
    out: Path,
    submit: str,
    duration: str,
    gpus: str,
    cpus: str,
    memory: str,
    queue: str,
    id_column: str | None,
    memory_unit: str,
) -> None:
    """A generic job CSV, one job a row (docs/replay.md)."""
    from fixtures.generators.job_csv import JobColumns, job_csv_trace
    from models.arrow.trace import write_trace

    _check_free(out)
    columns = JobColumns(
        submit=submit,
        duration=duration,
        gpus=gpus or None,
        cpus=cpus or None,
        memory=memory or None,
        queue=queue,
        id=id_column,
        memory_unit=memory_unit,
    )
    rows = job_csv_trace(source, columns)
    with staged(out) as target:
        write_trace(rows, target)
    click.echo(f"{len(rows)} actions -> {out}")
