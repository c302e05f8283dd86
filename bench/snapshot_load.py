"""How long a 100,000-pending-action Arrow snapshot takes to load, solve and write.

    .venv/bin/python -m bench.snapshot_load                 # load only
    .venv/bin/python -m bench.snapshot_load --solve         # and one tick, and its result tables

The snapshot comes from fixtures/generators/realistic_snapshot.py (--pending
queued actions, --running attempts at running ones). Arrow compute runs on one
thread. Every load figure is the best of --repeat runs, as wall and CPU time; the
machine is shared, so CPU time is the steadier of the two.

Paths compared:
- arrow: models.arrow.tables.read_snapshot (column-wise checks, then models built
  without per-row validation); split into read (IPC files, memory-mapped),
  check (every rule, column-wise) and build (the pydantic objects).
- arrow, model_construct: the same, building each model with model_construct.
- pydantic: Snapshot.model_validate of the same snapshot as plain data, the path
  a scenario file or an HTTP body takes.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import pyarrow as pa
from pydantic import BaseModel

from fixtures import FIXTURES
from models.arrow import decode as arrow_decode
from models.arrow.schema import SNAPSHOT_VERSION
from models.arrow.tables import (
    read_snapshot,
    read_tables,
    result_tables,
    write_snapshot,
    write_tables,
)
from models.snapshot import Snapshot

M = TypeVar("M", bound=BaseModel)

GENERATOR = FIXTURES / "generators" / "realistic_snapshot.py"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("realistic_snapshot", GENERATOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _best(run: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(wall s, cpu s) of the fastest of `repeat` runs, and the last run's value."""
    best = (float("inf"), float("inf"))
    value = None
    for _ in range(repeat):
        value = None
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        value = run()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best[0], best[1], value


def _line(label: str, wall: float, cpu: float) -> None:
    click.echo(f"  {label:<44} {wall:8.3f} s wall {cpu:8.3f} s cpu")


def _with_model_construct(path: Path) -> Snapshot:
    """read_snapshot, building every model with model_construct instead of _instances."""
    fast = arrow_decode._instances

    def construct(cls: type[M], columns: dict[str, Sequence[Any]]) -> list[M]:
        names = tuple(columns)
        return [
            cls.model_construct(**dict(zip(names, row, strict=True)))
            for row in zip(*columns.values(), strict=True)
        ]

    arrow_decode._instances = construct
    try:
        return read_snapshot(path)
    finally:
        arrow_decode._instances = fast


@click.command()
@click.option("--pending", default=100_000, show_default=True, help="Queued actions.")
@click.option("--running", default=2_000, show_default=True, help="Attempts at running ones.")
@click.option("--repeat", default=5, show_default=True, help="Runs per load figure.")
@click.option("--solve/--no-solve", default=False, help="Also time one tick and its results.")
@click.option("--time-limit", default=30.0, show_default=True, help="The tick's time limit.")
def main(pending: int, running: int, repeat: int, solve: bool, time_limit: float) -> None:
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    snapshot = _generator().generate(pending=pending, running=running)
    click.echo(
        f"snapshot: {len(snapshot.actions):,} actions"
        f" ({sum(a.state.value == 'queued' for a in snapshot.actions):,} queued),"
        f" {sum(len(a.containers) for a in snapshot.actions):,} containers,"
        f" {len(snapshot.queues)} queues, {len(snapshot.clusters)} clusters"
    )
    with tempfile.TemporaryDirectory() as tmp:
        ipc, parquet = Path(tmp) / "ipc", Path(tmp) / "parquet"
        wall, cpu, _ = _best(lambda: write_snapshot(snapshot, ipc), 1)
        _line("write snapshot (Arrow IPC)", wall, cpu)
        write_snapshot(snapshot, parquet, "parquet")
        size = sum(f.stat().st_size for f in ipc.iterdir()) / 2**20
        psize = sum(f.stat().st_size for f in parquet.iterdir()) / 2**20
        click.echo(f"  size: {size:.1f} MiB Arrow IPC, {psize:.1f} MiB Parquet")

        click.echo(f"load (best of {repeat}):")
        wall, cpu, tables = _best(lambda: read_tables(ipc), repeat)
        _line("read tables (IPC, memory-mapped)", wall, cpu)
        wall, cpu, checked = _best(
            lambda: arrow_decode._Checked(
                {
                    n: arrow_decode._conform("bench", n, t, SNAPSHOT_VERSION)
                    for n, t in tables.items()
                }
            ),
            repeat,
        )
        _line("check: types and every rule, column-wise", wall, cpu)
        wall, cpu, _ = _best(lambda: arrow_decode._build(checked), repeat)
        _line("build the pydantic models", wall, cpu)
        wall, cpu, _ = _best(lambda: arrow_decode._models(checked), repeat)
        _line("  the same with the cyclic GC left running", wall, cpu)
        wall, cpu, loaded = _best(lambda: read_snapshot(ipc), repeat)
        _line("read_snapshot (Arrow IPC), total", wall, cpu)
        wall, cpu, _ = _best(lambda: read_snapshot(parquet), repeat)
        _line("read_snapshot (Parquet), total", wall, cpu)
        if loaded != snapshot:
            raise click.ClickException("the loaded snapshot differs from the generated one")

        click.echo("other ways to build the same models:")
        wall, cpu, _ = _best(lambda: _with_model_construct(ipc), min(repeat, 2))
        _line("arrow checks + model_construct per row", wall, cpu)
        data = snapshot.model_dump()
        wall, cpu, _ = _best(lambda: Snapshot.model_validate(data), 1)
        _line("Snapshot.model_validate (no Arrow)", wall, cpu)

        if solve:
            _solve(loaded, time_limit, Path(tmp) / "result")


def _solve(snapshot: Snapshot, time_limit: float, out: Path) -> None:
    from solver import TickOptions, tick
    from solver.whatif.compare import Comparison, Solved, apply_changes, outcomes

    options = TickOptions(time_limit_s=time_limit)
    click.echo("solve and write:")
    wall, cpu, result = _best(lambda: tick(snapshot, options), 1)
    _line("tick", wall, cpu)
    info = result.solver
    click.echo(
        f"  status {info.status.value}, limit hit {info.limit_hit},"
        f" {len(result.scheduled):,} scheduled, {len(result.waiting):,} waiting,"
        f" {len(result.failed):,} failed; phases "
        + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in info.phases_s.items())
    )
    wall, cpu, tables = _best(lambda: result_tables(result), 1)
    _line("result tables", wall, cpu)
    wall, cpu, _ = _best(lambda: write_tables(tables, out / "baseline"), 1)
    _line("write result tables (Arrow IPC)", wall, cpu)

    click.echo("one what-if (queue.research.max_accelerators.H100=64):")
    change = ["queue.research.max_accelerators.H100=64"]
    wall, cpu, variant = _best(lambda: apply_changes(snapshot, change), 1)
    _line("apply the change (a checked copy)", wall, cpu)
    wall, cpu, solved = _best(lambda: Solved.of(variant, options), 1)
    _line("tick and result tables of the variant", wall, cpu)
    baseline = Solved(tables, outcomes(snapshot, tables))
    wall, cpu, comparison = _best(lambda: Comparison.of(change, baseline, solved), 1)
    _line("compare (column-wise joins)", wall, cpu)
    wall, cpu, _ = _best(lambda: comparison.write(out / "whatif"), 1)
    _line("write both results, the changes and summary", wall, cpu)
    click.echo("  " + "\n  ".join(comparison.summary(listed=0).splitlines()[:4]))


if __name__ == "__main__":
    main()
