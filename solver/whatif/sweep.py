"""A sweep: many variants of one snapshot, solved in parallel worker processes.

A variants file lists named variants, each a set of changes (solver.whatif.compare):

    variants:
      - name: h100-64
        set: {queue.research.max_accelerators.H100: 64}
      - name: lose-east
        drop: [cluster east]
      - name: both
        set:
          queue.research.max_accelerators.H100: 64
          queue.inference-eval.scheduling: strict_fifo
        drop: [cluster east, node_pool west/t4]

The baseline and every variant are solved by an executor (solver.whatif.executors:
local worker processes, or Ray tasks); the result is one comparison table, one row
per variant counted against the baseline, and the usage of every queue and cap in
each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from models.arrow.schema import SWEEP, SWEEP_USAGE
from models.arrow.tables import Format, write_tables
from models.errors import InternalError, InvalidInput, SluiceError
from models.scenario import read_yaml
from solver import TickOptions
from solver.whatif.compare import (
    Comparison,
    ScenarioEdit,
    Solved,
    parse_changes,
)
from solver.whatif.executors import SweepExecutor

BASELINE = "baseline"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Variant:
    name: str
    changes: tuple[ScenarioEdit, ...]

    @property
    def texts(self) -> list[str]:
        return [change.text for change in self.changes]


def load_variants(path: Path) -> list[Variant]:
    """The variants of a sweep file; every error names the file and the variant."""
    data = read_yaml(path)
    entries = data.get("variants") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InvalidInput(f"{path}: expected `variants:`, a list of {{name, set, drop}}")
    variants: list[Variant] = []
    for index, entry in enumerate(entries):
        where = f"{path}: variants.{index}"
        if not isinstance(entry, dict) or set(entry) - {"name", "set", "drop"}:
            raise InvalidInput(f"{where}: expected a mapping with name, set and drop")
        name = str(entry.get("name", ""))
        if not _NAME.match(name) or name == BASELINE:
            raise InvalidInput(
                f"{where}: name {name!r} must be letters, digits, `.`, `_` or `-`"
                f" (and not {BASELINE!r}); it names the variant's output directory"
            )
        if name in {v.name for v in variants}:
            raise InvalidInput(f"{where}: variant {name!r} appears twice")
        sets = entry.get("set") or {}
        drops = entry.get("drop") or []
        if not isinstance(sets, dict) or not isinstance(drops, list):
            raise InvalidInput(f"{where}: set is a mapping PATH: VALUE, drop a list of `KIND NAME`")
        words = [str(d).split() for d in drops]
        if any(len(pair) != 2 for pair in words):
            raise InvalidInput(f"{where}: each drop is `KIND NAME`, like `cluster east`")
        pairs = [(kind, target) for kind, target in words]
        texts = [f"{key}={'null' if value is None else value}" for key, value in sets.items()]
        variants.append(Variant(name, tuple(parse_changes(texts, pairs))))
    return variants


@dataclass
class Sweep:
    """The baseline's result, every variant's comparison with it, and the comparison table."""

    baseline: Solved
    comparisons: dict[str, Comparison]  # by variant name, in the file's order
    solve_s: dict[str, float]

    def table(self) -> pa.Table:
        """SWEEP: one row for the baseline, then one per variant."""
        rows = [self._row(BASELINE, [], self.baseline.results, {})]
        rows += [
            self._row(name, c.changes, c.variant, c.counts())
            for name, c in self.comparisons.items()
        ]
        return pa.Table.from_pylist(rows, schema=SWEEP)

    def _row(
        self, name: str, changes: list[str], results: dict[str, pa.Table], counts: dict[str, int]
    ) -> dict[str, Any]:
        scheduled = results["scheduled"]["action"].unique()
        return {
            "variant": name,
            "changes": "; ".join(changes),
            "status": results["solver"]["status"][0].as_py(),
            "scheduled": len(scheduled),
            "waiting": results["waiting"].num_rows,
            "failed": results["failed"].num_rows,
            "newly_scheduled": counts.get("newly_scheduled", 0),
            "newly_waiting": counts.get("newly_waiting", 0),
            "newly_failed": counts.get("newly_failed", 0),
            "heads_blocked": counts.get("heads_blocked", 0),
            "heads_unblocked": counts.get("heads_unblocked", 0),
            "solve_s": self.solve_s[name],
        }

    def usage(self) -> pa.Table:
        """SWEEP_USAGE: every side's usage table with its variant's name in front."""
        sides = [(BASELINE, self.baseline.results)]
        sides += [(name, c.variant) for name, c in self.comparisons.items()]
        tables = [
            results["usage"].add_column(0, "variant", pa.array([name] * results["usage"].num_rows))
            for name, results in sides
        ]
        return pa.concat_tables(tables).cast(SWEEP_USAGE)

    def summary(self) -> str:
        header = (
            f"{'variant':<24} {'sched':>6} {'wait':>6} {'fail':>6} {'+sched':>7} {'+wait':>6}"
            f" {'+fail':>6} {'blocked':>8} {'unblocked':>9}  {'status':<14} {'solve':>7}"
        )
        lines = [header]
        for row in self.table().to_pylist():
            lines.append(
                f"{row['variant']:<24} {row['scheduled']:>6} {row['waiting']:>6}"
                f" {row['failed']:>6} {row['newly_scheduled']:>7} {row['newly_waiting']:>6}"
                f" {row['newly_failed']:>6} {row['heads_blocked']:>8} {row['heads_unblocked']:>9}"
                f"  {row['status']:<14} {row['solve_s']:>6.2f}s"
            )
        for name, comparison in self.comparisons.items():
            lines.append(f"{name}: {'; '.join(comparison.changes)}")
        lines.append("each variant's details: variants/NAME/summary.txt")
        return "\n".join(lines)

    def write(self, directory: Path, fmt: Format = "arrow") -> None:
        """sweep.arrow, sweep_usage.arrow, summary.txt, baseline/ and variants/NAME/ (or
        `.parquet`)."""
        write_tables({"sweep": self.table(), "sweep_usage": self.usage()}, directory, fmt)
        write_tables(self.baseline.results, directory / BASELINE, fmt)
        for name, comparison in self.comparisons.items():
            place = directory / "variants" / name
            write_tables({**comparison.variant, **comparison.tables()}, place, fmt)
            (place / "summary.txt").write_text(comparison.summary() + "\n")
        (directory / "summary.txt").write_text(self.summary() + "\n")


def sweep(
    snapshot: Path,
    variants: Sequence[Variant],
    options: TickOptions,
    executor: SweepExecutor,
    progress: Callable[[], None] = lambda: None,
) -> Sweep:
    """Solve the baseline and every variant on `executor`; `progress` after each solve."""
    tasks = [Variant(BASELINE, ()), *variants]
    solved: dict[str, Solved] = {}
    finished = executor.solve_each(snapshot, [task.changes for task in tasks], options)
    try:
        for index, result in finished:
            if isinstance(result, BaseException):
                raise _worker_error(tasks[index].name, result)
            solved[tasks[index].name] = result
            progress()
    finally:
        finished.close()  # after an error: the solves not yet started never start
    return Sweep(
        baseline=solved[BASELINE],
        comparisons={
            v.name: Comparison.of(v.texts, solved[BASELINE], solved[v.name]) for v in variants
        },
        solve_s={
            task.name: solved[task.name].results["solver"]["wall_time_s"][0].as_py()
            for task in tasks
        },
    )


def _worker_error(name: str, error: BaseException | None) -> SluiceError:
    if isinstance(error, SluiceError):
        return type(error)(f"variant {name}: {error.message}")
    return InternalError(f"variant {name}: {type(error).__name__}: {error}")
