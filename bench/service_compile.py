"""What the service's tick spends compiling its snapshot, afresh and with what its last tick
compiled (docs/decisions.md, D451).

    .venv/bin/python -m bench.service_compile [--queued 10000] [--rounds 7]

The line is bench.service_load's: its cluster and queues, and --queued actions as that
benchmark submits them (one list of containers each). Each round makes the snapshot as the
service's read does (api.store.tick_io): the settings, queues and clusters validated anew,
the actions the same objects as long as their rows do not change. It is compiled twice,
afresh and with one kept CompileCache, as api.tick_work.SolverTick does, with the collector
off, as in a tick. Figures are CPU medians over the rounds; the kept cache's first compile,
which fills it, is left out.
"""

from __future__ import annotations

import gc
import statistics
import time
from datetime import UTC, datetime

import click

from bench.service_load import fill_actions
from fixtures.service_fleets import EAST_LOAD, LOAD_QUEUES
from models.snapshot import Action, Snapshot
from solver.placement.problem import CompileCache, compile_snapshot


def _cpu(snapshot: Snapshot, kept: CompileCache | None) -> float:
    """CPU seconds to compile `snapshot` (with `kept`), the collector off as in a tick."""
    gc.disable()
    try:
        started = time.process_time()
        compile_snapshot(snapshot, kept)
        return time.process_time() - started
    finally:
        gc.enable()


def _read(actions: list[Action]) -> Snapshot:
    """The snapshot as a tick's read gives it: the fleet validated anew, the kept actions."""
    fleet = Snapshot.model_validate(
        {"now": datetime.now(UTC), "queues": LOAD_QUEUES, "clusters": [EAST_LOAD]}
    )
    return fleet.model_copy(update={"actions": actions})


@click.command()
@click.option("--queued", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--rounds", type=click.IntRange(min=2), default=7, show_default=True)
def main(queued: int, rounds: int) -> None:
    now = datetime.now(UTC)
    actions = [Action.model_validate(a | {"submitted_at": now}) for a in fill_actions(queued)]
    kept = CompileCache()
    fresh_s, kept_s = [], []
    with click.progressbar(range(rounds), label="rounds") as bar:
        for _ in bar:
            snapshot = _read(actions)
            fresh_s.append(_cpu(snapshot, None))
            kept_s.append(_cpu(snapshot, kept))
    click.echo(
        f"compile of {queued:,} queued, CPU medians of {rounds} rounds:"
        f" afresh {statistics.median(fresh_s) * 1000:.1f} ms,"
        f" kept {statistics.median(kept_s[1:]) * 1000:.1f} ms"
        f" (its first, which fills it, {kept_s[0] * 1000:.1f} ms)"
    )


if __name__ == "__main__":
    main()
