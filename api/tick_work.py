"""What one tick computes away from the API: the decisions, then what the reads show of them.

`solve_tick` takes the snapshot, returns the `TickResult` and, for every strict_fifo queue
whose head the tick left blocked, that head's explanation, so that no read request has to
solve. In a worker process (api.solver_process) the tick loop calls `solve_from_file`, which
reads the snapshot itself. Anything else the
reads show per tick, computed from the same snapshot and result, belongs here too, where it
runs in the worker beside the solve.

The worker's arguments cross a process boundary pickled, so the engine passed in must be a
module-level callable (a `functools.partial` of one), not a closure.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

from api.store.tick_io import SqliteTickIO
from models.errors import ErrorCode, SluiceError
from models.explanation import Explanation
from models.result import TickResult
from models.snapshot import Action, Snapshot
from solver import TickOptions, tick
from solver.explain.action import explain, explain_failure

TickFn = Callable[[Snapshot], TickResult]


def solver_tick(time_limit_s: float, wall_guard_s: float | None = None) -> TickFn:
    """The real engine, with the service's time limit and wall-clock guard."""
    options = TickOptions(time_limit_s=time_limit_s, wall_guard_s=wall_guard_s)
    return functools.partial(tick, options=options)


@dataclass(frozen=True)
class HeadExplaining:
    """How the worker explains blocked heads: with the service's own model budget per head
    (no wall-clock guard: an explanation's answer must not depend on the load), and no new
    explanation started once `budget_s` of wall time has gone on them this tick."""

    options: TickOptions
    budget_s: float


class SolvedTick(BaseModel):
    result: TickResult
    # Blocked heads' explanations by queue name; a head left out (the budget ran out, or it
    # could not be explained) shows none until a later tick explains it.
    head_explanations: dict[str, Explanation] = Field(default_factory=dict)
    solve_s: float = 0.0
    explain_s: float = 0.0
    worker_pid: int = 0  # the process that solved it (the server's own in thread mode)


def solve_tick(tick_fn: TickFn, snapshot: Snapshot, heads: HeadExplaining) -> SolvedTick:
    started = time.perf_counter()
    result = tick_fn(snapshot)
    solved = time.perf_counter()
    explanations = explain_blocked_heads(snapshot, result, heads)
    return SolvedTick(
        result=result,
        head_explanations=explanations,
        solve_s=solved - started,
        explain_s=time.perf_counter() - solved,
        worker_pid=os.getpid(),
    )


# This worker process's readers of the store's file, one per file: each keeps its parsed
# actions between ticks, so a tick parses only the actions submitted since the last.
_READERS: dict[str, SqliteTickIO] = {}


def _reader(path: str) -> SqliteTickIO:
    reader = _READERS.get(path)
    if reader is None:
        reader = _READERS[path] = SqliteTickIO(path, reader_only=True)
    return reader


class WorkerTick(BaseModel):
    """What the worker sends back: the solved tick, the store generation its snapshot was
    read at, and the rows it could not read (for the server to fail: it is the writer)."""

    solved: SolvedTick
    generation: int
    unreadable: dict[str, str]
    read_s: float


def solve_from_file(path: str, now: datetime, tick_fn: TickFn, heads: HeadExplaining) -> str:
    """`solve_tick` in the worker, on a snapshot it reads itself from the store's file
    (through connections that never write), as JSON.

    The server then pays neither for reading the snapshot nor for sending it (both measured
    in the hundreds of milliseconds of its GIL at 10,000 queued), and JSON decodes in a fifth
    of the time unpickling the same models takes (docs/benchmarks.md#service)."""
    started = time.perf_counter()
    planned, unreadable = _reader(path).read_tick_input_unchecked(now)
    read_s = time.perf_counter() - started
    solved = solve_tick(tick_fn, planned.snapshot, heads)
    answer = WorkerTick(
        solved=solved, generation=planned.generation, unreadable=unreadable, read_s=read_s
    )
    return answer.model_dump_json()


def explain_from_file(
    path: str, now: datetime, action_id: str, last_result: str | None, options: TickOptions
) -> str:
    """`solver.explain.action.explain` in a worker, on the store as of `now` read there, with
    the last tick's result (JSON: a fifth of the server's time that pickling it takes)."""
    snapshot = _reader(path).read_snapshot(now)
    result = TickResult.model_validate_json(last_result) if last_result else None
    return explain(snapshot, action_id, result, options).model_dump_json()


def explain_failure_from_file(
    path: str, now: datetime, action: Action, code: ErrorCode, message: str, options: TickOptions
) -> str:
    """`solver.explain.action.explain_failure` in a worker, on the store as of `now`."""
    snapshot = _reader(path).read_snapshot(now)
    return explain_failure(snapshot, action, code, message, options).model_dump_json()


def explain_blocked_heads(
    snapshot: Snapshot, result: TickResult, heads: HeadExplaining
) -> dict[str, Explanation]:
    """Each blocked head's explanation, in queue-name order until the budget is spent."""
    started = time.perf_counter()
    explanations: dict[str, Explanation] = {}
    for name, metrics in sorted(result.queues.items()):
        if not metrics.head_blocked or metrics.head_action is None:
            continue
        if time.perf_counter() - started >= heads.budget_s:
            break
        try:
            explanations[name] = explain(snapshot, metrics.head_action, result, heads.options)
        except SluiceError:
            continue  # the head is not in the snapshot: nothing to show
    return explanations
