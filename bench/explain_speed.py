"""How long one explanation takes in a tick of 10,000 queued actions.

    .venv/bin/python -m bench.explain_speed                   # the M scenario, 10 per kind
    .venv/bin/python -m bench.explain_speed --per-group 40    # more samples

Issue 5: "an explanation for an action in a tick of 10,000 queued actions comes back in
under a second, measured in a benchmark." The snapshot is the synthetic M scenario
(fixtures.generators.synthetic: 10,000 queued, 1,000 running, 50 queues, 10 clusters,
100 node pools). It is ticked once; then actions are explained against that tick's
result and its own compiled state (solver.tick.tick_with_state; --rebuild rebuilds it from
the result per explanation, as the service's worker does): up to --per-group of every group
(each wait reason, failed, scheduled), spread over the line from its front to its back.
Each explanation is timed on its own in CPU seconds of this process (time.process_time: a
shared machine's load does not stretch it); the figure that matters is the slowest.

Issue 18: suggestions are proven by re-running the tick (solver.explain.replay); the table
also counts the suggestions offered, those left unproven and ruled out, and the most ticks
one explanation re-ran.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

import click

from fixtures.generators.synthetic import M, synthetic
from models.result import TickResult
from solver.explain.action import explain
from solver.tick import TickOptions, tick_with_state

BUDGET_S = 1.0


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


@click.command()
@click.option("--per-group", type=click.IntRange(min=2), default=10, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True, help="Scenario seed.")
@click.option(
    "--time-limit", type=float, default=5.0, show_default=True, help="The tick's limit (s)."
)
@click.option("--rebuild", is_flag=True, help="Rebuild the tick's state per explanation.")
def main(per_group: int, seed: int, time_limit: float, rebuild: bool) -> None:
    started = time.perf_counter()
    snapshot = synthetic(M, seed)
    queued = sum(1 for a in snapshot.actions if a.state.value == "queued")
    click.echo(f"scenario m (seed {seed}): {queued} queued, {len(snapshot.actions) - queued}"
               f" running; generated in {time.perf_counter() - started:.1f} s")  # fmt: skip
    started = time.perf_counter()
    result, state = tick_with_state(snapshot, TickOptions(time_limit_s=time_limit))
    click.echo(
        f"tick: {time.perf_counter() - started:.1f} s ({len(result.scheduled)} scheduled,"
        f" {len(result.failed)} failed, {len(result.waiting)} waiting; solver"
        f" {result.solver.status.value})"
    )
    kept = None if rebuild else state
    explain(snapshot, result.waiting[0].action, result, state=kept)  # imports and caches warm
    click.echo(
        f"\n{'group':<34} {'n':>3} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}  solves"
        "  offered unproven ruled_out replays"
    )
    slowest = (0.0, "")
    everything: list[float] = []
    for group, ids in sorted(_groups(result).items()):
        times: list[float] = []
        solves: list[int] = []
        replays: list[int] = []
        offered = unproven = ruled_out = 0
        for action in _spread(ids, per_group):
            clock = time.process_time()
            explanation = explain(snapshot, action, result, state=kept)
            elapsed = time.process_time() - clock
            times.append(elapsed)
            solves.append(explanation.model_solves)
            replays.append(explanation.replays)
            offered += len(explanation.suggestions)
            unproven += len(explanation.unproven)
            ruled_out += len(explanation.ruled_out)
            slowest = max(slowest, (elapsed, action))
        everything += times
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        click.echo(
            f"{group:<34} {len(times):>3} {statistics.median(times) * 1e3:>10.1f}"
            f" {p95 * 1e3:>8.1f} {times[-1] * 1e3:>8.1f}  {max(solves):>6}  {offered:>7}"
            f" {unproven:>8} {ruled_out:>9} {max(replays):>7}"
        )
    verdict = "under" if slowest[0] < BUDGET_S else "OVER"
    click.echo(
        f"\n{len(everything)} explanations: median {statistics.median(everything) * 1e3:.0f} ms,"
        f" slowest {slowest[0] * 1e3:.0f} ms ({slowest[1]}): {verdict} the"
        f" {BUDGET_S:.0f} s budget"
    )


if __name__ == "__main__":
    main()
