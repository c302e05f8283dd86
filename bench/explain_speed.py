"""How long one explanation takes in a tick of 10,000 queued actions.

    .venv/bin/python -m bench.explain_speed                   # the M scenario, 10 per kind
    .venv/bin/python -m bench.explain_speed --per-group 40    # more samples
    .venv/bin/python -m bench.explain_speed --baseline /tmp/explain-base   # before and after

Issue 5: "an explanation for an action in a tick of 10,000 queued actions comes back in
under a second, measured in a benchmark." The snapshot is the synthetic M scenario
(fixtures.generators.synthetic: 10,000 queued, 1,000 running, 50 queues, 10 clusters,
100 node pools). It is ticked once; then actions are explained against that tick's
result and its own compiled state (solver.tick.tick_with_state; --rebuild rebuilds it from
the result per explanation, as the service's worker does, with one CompileCache for all):
up to --per-group of every group (each wait reason, failed, scheduled), spread over the line
from its front to its back.
Each explanation is timed on its own in CPU seconds of this process (time.process_time: a
shared machine's load does not stretch it); the figure that matters is the slowest. Sharing
the tick's state, they share its proofs' placement answers too, as the service's explanations
of a tick's blocked heads do (D360): a model one explanation solved, a later one reuses.

Issue 18: suggestions are proven by re-running the tick (solver.explain.replay); the table
also counts the suggestions offered, those left unproven and ruled out, and the most ticks
one explanation re-ran.

`--baseline DIR` measures another tree of the project (an export of an older commit,
`git archive` or `git worktree add`) beside this one, each in a subprocess whose imports come
from its tree, and prints both side by side: a before/after of the same run. The two take
turns explanation by explanation (one explains while the other waits; which goes first
alternates), so a machine whose speed drifts during the run (a shared one's does, by a
fifth and more over a minute) slows both sides alike. A tree older than the tick's state
(no `tick_with_state`) is measured without it.
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
from models.snapshot import Snapshot
from solver.explain.action import explain
from solver.placement.problem import CompileCache
from solver.tick import TickOptions, tick

BUDGET_S = 1.0
ROOT = Path(__file__).resolve().parents[1]  # this tree


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


@dataclass
class _Tick:
    """The M scenario ticked once, and what its explanations are given."""

    snapshot: Snapshot
    result: TickResult
    extra: dict[str, Any]  # what this tree's explain() takes beside them


def _ticked(seed: int, time_limit: float, rebuild: bool) -> _Tick:
    """The M scenario and its tick, explanations' caches warm; progress on stderr."""
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
    if rebuild and "kept" in inspect.signature(explain).parameters:
        extra["kept"] = CompileCache()  # one for all the explanations, as the service's worker
    click.echo(
        f"tick: {time.perf_counter() - started:.1f} s wall ({len(result.scheduled)} scheduled,"
        f" {len(result.failed)} failed, {len(result.waiting)} waiting; solver"
        f" {result.solver.status.value})",
        err=True,
    )
    explain(snapshot, result.waiting[0].action, result, **extra)  # imports and caches warm
    return _Tick(snapshot, result, extra)


def _chosen(result: TickResult, per_group: int) -> list[tuple[str, str]]:
    """(group, action) of every explanation to time, group by group."""
    return [
        (group, action)
        for group, ids in sorted(_groups(result).items())
        for action in _spread(ids, per_group)
    ]


def _timed(ticked: _Tick, action: str) -> Sample:
    clock = time.process_time()
    explanation = explain(ticked.snapshot, action, ticked.result, **ticked.extra)
    elapsed = time.process_time() - clock
    return Sample(
        action,
        elapsed,
        explanation.model_solves,
        explanation.replays,
        len(explanation.suggestions),
        len(explanation.unproven),
        len(explanation.ruled_out),
    )


def measure(per_group: int, seed: int, time_limit: float, rebuild: bool) -> dict[str, list[Sample]]:
    """Explanations of the M scenario's tick, by group; progress on stderr."""
    ticked = _ticked(seed, time_limit, rebuild)
    samples: dict[str, list[Sample]] = {}
    for group, action in _chosen(ticked.result, per_group):
        samples.setdefault(group, []).append(_timed(ticked, action))
    return samples


def _serve(seed: int, time_limit: float, rebuild: bool, per_group: int) -> None:
    """One side of an interleaved comparison: the explanations to time as a JSON line, then
    a JSON Sample line for each action id read from stdin."""
    ticked = _ticked(seed, time_limit, rebuild)
    print(json.dumps(_chosen(ticked.result, per_group)), flush=True)
    for line in sys.stdin:
        print(json.dumps(asdict(_timed(ticked, line.strip()))), flush=True)


def _interleaved(
    trees: tuple[Path, Path], arguments: list[str]
) -> tuple[dict[str, list[Sample]], dict[str, list[Sample]]]:
    """The same explanations timed in both trees (before, after), taking turns."""
    sides = [
        subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", *arguments],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for tree in trees
    ]
    try:
        chosen = [json.loads(_line(side)) for side in sides][1]  # this tree's choice
        timed: tuple[dict[str, list[Sample]], dict[str, list[Sample]]] = ({}, {})
        with click.progressbar(chosen, label="explanations, both trees", file=sys.stderr) as bar:
            for k, (group, action) in enumerate(bar):
                for turn in (0, 1) if k % 2 == 0 else (1, 0):
                    side = sides[turn]
                    assert side.stdin is not None
                    side.stdin.write(action + "\n")
                    side.stdin.flush()
                    sample = Sample(**json.loads(_line(side)))
                    timed[turn].setdefault(group, []).append(sample)
        return timed
    finally:
        for side in sides:
            if side.stdin is not None:
                side.stdin.close()
            side.wait()


def _line(side: subprocess.Popen[str]) -> str:
    assert side.stdout is not None
    line = side.stdout.readline()
    if not line:
        raise click.ClickException(f"a measured tree stopped (exit {side.wait()})")
    return line


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
    paired = {s.action: s.seconds for rows in before.values() for s in rows}
    ratios = [
        s.seconds / paired[s.action]
        for rows in after.values()
        for s in rows
        if paired.get(s.action, 0) > 0
    ]
    if ratios:
        click.echo(
            f"after / before, explanation by explanation: median {statistics.median(ratios):.2f}"
        )
    for name, rows in (("before", before), ("after", after)):
        every = [s.seconds for group in rows.values() for s in group]
        click.echo(
            f"{name}: {len(every)} explanations, median {statistics.median(every) * 1e3:.0f} ms,"
            f" slowest {max(every) * 1e3:.0f} ms"
        )


def _as_json(samples: dict[str, list[Sample]]) -> dict[str, list[dict[str, Any]]]:
    return {group: [asdict(s) for s in rows] for group, rows in samples.items()}


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
    help="Another tree of the project to measure beside this one, taking turns.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="The samples as JSON on stdout (with --baseline, both sides: before and after).",
)
@click.option("--serve", is_flag=True, hidden=True, help="One side of --baseline.")
def main(
    per_group: int, seed: int, time_limit: float, rebuild: bool, baseline: Path | None,
    as_json: bool, serve: bool,
) -> None:  # fmt: skip
    if serve:
        _serve(seed, time_limit, rebuild, per_group)
        return
    if baseline is None:
        after = measure(per_group, seed, time_limit, rebuild)
        if as_json:
            click.echo(json.dumps(_as_json(after)))
        else:
            _table(after)
        return
    if not (baseline / "solver" / "tick.py").is_file():
        # Its imports would fall through to this tree's installed one, measured twice.
        raise click.BadParameter(
            f"{baseline} is not a tree of the project", param_hint="--baseline"
        )
    arguments = ["--per-group", str(per_group), "--seed", str(seed)]
    arguments += ["--time-limit", str(time_limit)] + (["--rebuild"] if rebuild else [])
    before, after = _interleaved((baseline, ROOT), arguments)
    if as_json:
        sides = {"before": before, "after": after}
        click.echo(json.dumps({side: _as_json(samples) for side, samples in sides.items()}))
        return
    click.echo(f"before ({baseline}):")
    _table(before)
    click.echo("\nafter (this tree):")
    _table(after)
    click.echo("\nbefore -> after, CPU seconds:")
    _compare(before, after)


if __name__ == "__main__":
    main()
