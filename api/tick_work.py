"""What one tick computes away from the API: the decisions, then what the reads show of them.

`solve_tick` is the call the tick loop sends to its worker (api.solver_process): it takes the
snapshot, returns the `TickResult` and, for every strict_fifo queue whose head the tick left
blocked, that head's explanation, so that no read request has to solve. Anything else the
reads show per tick, computed from the same snapshot and result, belongs here too, where it
runs in the worker beside the solve.

Everything here crosses a process boundary: arguments and answers are pickled, so the
engine passed in must be a module-level callable (a `functools.partial` of one), not a
closure.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from models.errors import SluiceError
from models.explanation import Explanation
from models.result import TickResult
from models.snapshot import Snapshot
from solver import TickOptions, tick
from solver.explain.action import explain

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


def solve_tick_wire(tick_fn: TickFn, snapshot: Snapshot, heads: HeadExplaining) -> str:
    """`solve_tick` for a worker process: the answer as JSON, which the API process decodes
    in a fifth of the time unpickling the same models takes (measured on M: 0.14 s against
    0.66 s, docs/benchmarks.md#service), and that time is the API's GIL."""
    return solve_tick(tick_fn, snapshot, heads).model_dump_json()


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
