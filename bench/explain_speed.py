"""How long one explanation takes in a tick of 10,000 queued actions.

    .venv/bin/python -m bench.explain_speed                   # the M scenario, 10 per kind
    .venv/bin/python -m bench.explain_speed --per-group 40    # more samples
    .venv/bin/python -m bench.explain_speed --baseline /tmp/explain-base   # before and after

Issue 5: "an explanation for an action in a tick of 10,000 queued actions comes back in
under a second, measured in a benchmark." The snapshot is the synthetic M scenario
(fixtures.generators.synthetic: 10,000 queued, 1,000 running, 50 queues, 10 clusters,
100 node pools). It is ticked once; then actions are explained against that tick's
result and its own compiled state (solver.tick.tick_with_state; --rebuild rebuilds it from
the result per explanation, as the service's worker does): up to --per-group of every group
(each wait reason, failed, scheduled), spread over the line from its front to its back.
Each explanation is timed on its own in CPU seconds of this process (time.process_time: a
shared machine's load does not stretch it); the figure that matters is the slowest. Sharing
the tick's state, they share its proofs' placement answers too, as the service's explanations
of a tick's blocked heads do (D360): a model one explanation solved, a later one reuses.

Issue 18: suggestions are proven by re-running the tick (solver.explain.replay); the table
also counts the suggestions offered, those left unproven and ruled out, and the most ticks
one explanation re-ran.

`--baseline DIR` first measures another tree of the project (an export of an older commit,
`git archive` or `git worktree add`) the same way in a subprocess whose imports come from
DIR, then this one, and prints both side by side: a before/after of the same run, on the
same machine load. A tree older than the tick's state (no `tick_with_state`) is measured
without it.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

from fixtures.generators.synthetic import M, synthetic
from models.result import TickResult
from solver.explain.action import explain
from solver.tick import TickOptions, tick

BUDGET_S = 1.0


@dataclass
class Sample:
    action: str
    seconds: float  # CPU seconds of this process
    solves: int
    replays: int
    offered: int
    unproven: int
    ruled_out: int


def _groups(result: TickResult) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for waiting in result.waiting:
        groups[f"waiting/{waiting.reason.value}"].append(waiting.action)
    for failed in result.failed:
        groups[f"failed/{failed.code.value}"].append(failed.action)
    groups["scheduled"] = [s.action for s in result.scheduled]
    return groups


def _spread(ids: list[str], count: int) -> list[str]:
    """`count` ids evenly spaced from the first to the last."""
    if len(ids) <= count:
        return ids
    step = (len(ids) - 1) / (count - 1)
    return [ids[round(i * step)] for i in range(count)]


def measure(per_group: int, seed: int, time_limit: float, rebuild: bool) -> dict[str, list[Sample]]:
    """Explanations of the M scenario's tick, by group; progress on stderr."""
    started = time.perf_counter()
    snapshot = synthetic(M, seed)
    queued = sum(1 for a in snapshot.actions if a.state.value == "queued")
    click.echo(f"scenario m (seed {seed}): {queued} queued, {len(snapshot.actions) - queued}"
               f" running; generated in {time.perf_counter() - started:.1f} s",
               err=True)  # fmt: skip
    started = time.perf_counter()
    options = TickOptions(time_limit_s=time_limit)
    with_state = getattr(importlib.import_module("solver.tick"), "tick_with_state", None)
    extra: dict[str, Any] = {}  # what an older tree's explain() takes
    if with_state is not None:
        result, state = with_state(snapshot, options)
        if not rebuild and "state" in inspect.signature(explain).parameters:
            extra["state"] = state
    else:  # a tree from before the tick's state could be kept
        result = tick(snapshot, options)
    click.echo(
        f"tick: {time.perf_counter() - started:.1f} s wall ({len(result.scheduled)} scheduled,"
        f" {len(result.failed)} failed, {len(result.waiting)} waiting; solver"
        f" {result.solver.status.value})",
        err=True,
    )
    explain(snapshot, result.waiting[0].action, result, **extra)  # imports and caches warm
    samples: dict[str, list[Sample]] = {}
    for group, ids in sorted(_groups(result).items()):
        for action in _spread(ids, per_group):
            clock = time.process_time()
            explanation = explain(snapshot, action, result, **extra)
            elapsed = time.process_time() - clock
            samples.setdefault(group, []).append(
                Sample(
                    action,
                    elapsed,
                    explanation.model_solves,
                    explanation.replays,
                    len(explanation.suggestions),
                    len(explanation.unproven),
                    len(explanation.ruled_out),
                )
            )
    return samples


def _table(samples: dict[str, list[Sample]]) -> None:
    click.echo(
        f"{'group':<34} {'n':>3} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}  solves"
        "  offered unproven ruled_out replays"
    )
    for group, rows in samples.items():
        times = sorted(s.seconds for s in rows)
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        click.echo(
            f"{group:<34} {len(times):>3} {statistics.median(times) * 1e3:>10.1f}"
            f" {p95 * 1e3:>8.1f} {times[-1] * 1e3:>8.1f}  {max(s.solves for s in rows):>6}"
            f"  {sum(s.offered for s in rows):>7} {sum(s.unproven for s in rows):>8}"
            f" {sum(s.ruled_out for s in rows):>9} {max(s.replays for s in rows):>7}"
        )
    every = [s for rows in samples.values() for s in rows]
    slowest = max(every, key=lambda s: s.seconds)
    verdict = "under" if slowest.seconds < BUDGET_S else "OVER"
    click.echo(
        f"\n{len(every)} explanations: median"
        f" {statistics.median(s.seconds for s in every) * 1e3:.0f} ms, slowest"
        f" {slowest.seconds * 1e3:.0f} ms ({slowest.action}): {verdict} the"
        f" {BUDGET_S:.0f} s budget"
    )


def _compare(before: dict[str, list[Sample]], after: dict[str, list[Sample]]) -> None:
    click.echo(
        f"{'group':<34} {'n':>3} {'median ms':>17} {'max ms':>17} {'unproven':>9} {'offered':>9}"
    )
    for group in sorted(set(before) | set(after)):
        old, new = before.get(group, []), after.get(group, [])
        if not old or not new:
            continue

        def cell(rows: list[Sample], pick: str) -> str:
            times = [s.seconds * 1e3 for s in rows]
            return f"{statistics.median(times) if pick == 'median' else max(times):,.0f}"

        click.echo(
            f"{group:<34} {len(new):>3} {cell(old, 'median'):>7} -> {cell(new, 'median'):<6}"
            f" {cell(old, 'max'):>7} -> {cell(new, 'max'):<6}"
            f" {sum(s.unproven for s in old):>3} -> {sum(s.unproven for s in new):<3}"
            f" {sum(s.offered for s in old):>3} -> {sum(s.offered for s in new):<3}"
        )
    for name, rows in (("before", before), ("after", after)):
        every = [s.seconds for group in rows.values() for s in group]
        click.echo(
            f"{name}: {len(every)} explanations, median {statistics.median(every) * 1e3:.0f} ms,"
            f" slowest {max(every) * 1e3:.0f} ms"
        )


def _measured_in(tree: Path, arguments: list[str]) -> dict[str, list[Sample]]:
    """This script run on another tree's code (its imports first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, str(Path(__file__).resolve()), "--json", *arguments]
    out = subprocess.run(command, cwd=tree, env=env, check=True, stdout=subprocess.PIPE, text=True)
    raw = json.loads(out.stdout)
    return {group: [Sample(**s) for s in rows] for group, rows in raw.items()}


@click.command()
@click.option("--per-group", type=click.IntRange(min=2), default=10, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True, help="Scenario seed.")
@click.option(
    "--time-limit", type=float, default=5.0, show_default=True, help="The tick's limit (s)."
)
@click.option("--rebuild", is_flag=True, help="Rebuild the tick's state per explanation.")
@click.option(
    "--baseline",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Another tree of the project to measure first, in the same run.",
)
@click.option("--json", "as_json", is_flag=True, help="The samples as JSON on stdout.")
def main(
    per_group: int, seed: int, time_limit: float, rebuild: bool, baseline: Path | None,
    as_json: bool,
) -> None:  # fmt: skip
    arguments = ["--per-group", str(per_group), "--seed", str(seed)]
    arguments += ["--time-limit", str(time_limit)] + (["--rebuild"] if rebuild else [])
    before = _measured_in(baseline, arguments) if baseline is not None else None
    after = measure(per_group, seed, time_limit, rebuild)
    if as_json:
        click.echo(json.dumps({g: [asdict(s) for s in rows] for g, rows in after.items()}))
        return
    if before is not None:
        click.echo(f"before ({baseline}):")
        _table(before)
        click.echo("\nafter (this tree):")
    _table(after)
    if before is not None:
        click.echo("\nbefore -> after, CPU seconds:")
        _compare(before, after)


if __name__ == "__main__":
    main()
