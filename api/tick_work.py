"""What one tick computes away from the API: the decisions, then what the reads show of them.

`solve_tick` takes the snapshot, returns the `TickResult` and, for every strict_fifo queue
whose head the tick left blocked, that head's explanation, so that no read request has to
solve. In a worker process (api.solver_process) the tick loop calls `solve_from_file`, which
reads the snapshot itself. Anything else the reads show per tick, computed from the same
snapshot and result, belongs in `solve_tick` too, where it runs in the worker beside the
solve.

The worker's arguments cross a process boundary pickled, so the engine passed in must be a
module-level callable (a `functools.partial` of one, or an instance of a module-level class
such as `SolverTick`), not a closure.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

from api.store.records import DecisionRows, TickWriteBack
from api.store.tick_io import SqlTickIO
from models.encoded import EncodedModels
from models.errors import ErrorCode, SluiceError
from models.explanation import Explanation
from models.forecast import LearnedDurations, StartForecast
from models.result import (
    TickResult,
    WaitingAction,
    encoded_waiting,
    read_result_text,
    result_summary,
    result_text,
)
from models.snapshot import Action, Snapshot
from solver import TickOptions
from solver.explain.action import explain, explain_failure
from solver.placement.problem import CompileCache
from solver.placement.resume import TickState
from solver.replay.forecast import ForecastBudget, forecast
from solver.tick import tick_with_state

log = logging.getLogger("sluice.tick")

TickFn = Callable[[Snapshot], TickResult | tuple[TickResult, TickState]]
"""A tick of a snapshot: the real engine gives its state too (solver.tick.tick_with_state),
which the blocked heads' explanations resume from; a test's stand-in may give the result."""
ForecastFn = Callable[[Snapshot, TickResult, LearnedDurations], dict[str, StartForecast]]
"""After a tick: its snapshot, its result and the learned run times -> forecasts by action."""

FORECAST_GRID_S = 60.0
"""The least time between a forecast's simulated ticks: estimates to the minute, so its
ticks reach hours ahead rather than a few periods of a fast service."""


def solver_tick(time_limit_s: float, wall_guard_s: float | None = None) -> TickFn:
    """The real engine, with the service's time limit and wall-clock guard."""
    return SolverTick(TickOptions(time_limit_s=time_limit_s, wall_guard_s=wall_guard_s))


@dataclass(frozen=True)
class SolverTick:
    """The real engine with the service's options, compiling each snapshot with what the
    process's last tick compiled (solver.placement.problem.CompileCache): the store keeps an
    unchanged action as the same object from one read to the next (api.store.tick_io), so
    a tick compiles only what came or changed since (D451)."""

    options: TickOptions

    def __call__(self, snapshot: Snapshot) -> tuple[TickResult, TickState]:
        with _TICKS_COMPILED.lent() as kept:
            return tick_with_state(snapshot, self.options, kept)


class _KeptCompile:
    """A CompileCache of this process (the worker, or the server in thread mode), lent to one
    caller at a time: another one that finds it lent (a second tick loop of the process, as
    tests run several services in one) compiles on its own."""

    def __init__(self) -> None:
        self.cache = CompileCache()
        self._lock = threading.Lock()

    @contextmanager
    def lent(self) -> Iterator[CompileCache | None]:
        if not self._lock.acquire(blocking=False):
            yield None
            return
        try:
            yield self.cache
        finally:
            self._lock.release()


# What the last tick of this process compiled, and what its last forecast's simulated ticks
# did: a forecast's snapshots hold the same line, but as work the simulation started and
# ended, which the next tick would not meet again.
_TICKS_COMPILED = _KeptCompile()
_FORECASTS_COMPILED = _KeptCompile()
# What the last explanation of this process compiled: explanations rebuild the tick's state
# from a snapshot of the store as of their request, the same line but for what came or went.
_EXPLANATIONS_COMPILED = _KeptCompile()


def service_forecast(period_s: float, time_limit_s: float) -> ForecastFn:
    """Forecasts whose simulated ticks share one tick's counted model-check limit, so
    forecasting costs about one more tick (solver.replay.forecast)."""
    ticks = ForecastBudget().ticks
    budget = ForecastBudget(
        period_s=max(period_s, FORECAST_GRID_S),
        tick=TickOptions(time_limit_s=time_limit_s / ticks),
    )
    return ServiceForecast(budget)


@dataclass(frozen=True)
class ServiceForecast:
    """The service's forecasts, whose simulated ticks compile with what the process's last
    forecast compiled (D451)."""

    budget: ForecastBudget

    def __call__(
        self, snapshot: Snapshot, result: TickResult, learned: LearnedDurations
    ) -> dict[str, StartForecast]:
        with _FORECASTS_COMPILED.lent() as kept:
            return forecast(snapshot, result, learned, self.budget, kept)


@dataclass(frozen=True)
class Forecasting:
    """How a tick forecasts its waiting actions' starts, with the run times learned so far."""

    forecast_fn: ForecastFn
    learned: LearnedDurations


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


def worker_ready() -> int:
    """A first call for a new worker: unpickling it imports this module and so the solver
    (seconds), which the worker then has before its first tick."""
    return os.getpid()


# The last tick each tick loop solved in this process (the worker, or the server in thread
# mode), by the loop's key, for `forecast_kept`: one snapshot and result per loop at most.
_KEPT: dict[str, tuple[Snapshot, TickResult]] = {}


def solve_tick(
    tick_fn: TickFn, snapshot: Snapshot, heads: HeadExplaining, keep_as: str | None = None
) -> SolvedTick:
    """`keep_as`: keep the snapshot and result here under this key, for `forecast_kept`."""
    started = time.perf_counter()
    ticked = tick_fn(snapshot)
    result, state = ticked if isinstance(ticked, tuple) else (ticked, None)
    solved = time.perf_counter()
    explanations = explain_blocked_heads(snapshot, result, heads, state)
    if keep_as is not None:
        _KEPT[keep_as] = (snapshot, result)
    return SolvedTick(
        result=result,
        head_explanations=explanations,
        solve_s=solved - started,
        explain_s=time.perf_counter() - solved,
        worker_pid=os.getpid(),
    )


def forecast_kept(keep_as: str, forecasting: Forecasting) -> EncodedModels[StartForecast]:
    """When each action the tick kept under `keep_as` left waiting should start, each
    forecast's JSON by action id (models.encoded: the server keeps them so and decodes the
    one a read shows; decoding 10,000 held its GIL); called after that tick's write-back, so
    forecasts never delay decisions. Nothing kept (a new worker since) or a failed forecast:
    no forecasts this tick, the decisions stand."""
    kept = _KEPT.pop(keep_as, None)
    if kept is None or not kept[1].waiting:
        return EncodedModels(StartForecast, {})
    snapshot, result = kept
    try:
        forecasts = forecasting.forecast_fn(snapshot, result, forecasting.learned)
    except Exception:  # a bug in a forecast must not undo or stop the ticks
        log.exception("forecast failed; waiting actions show none this tick")
        return EncodedModels(StartForecast, {})
    return EncodedModels.of(StartForecast, forecasts.items())


# This worker process's readers of the store, one per database: each keeps the live actions
# between ticks, so a tick reads and parses only the rows changed since the last
# (api.store.tick_io.LiveActions).
_READERS: dict[str, SqlTickIO] = {}


def _reader(path: str) -> SqlTickIO:
    reader = _READERS.get(path)
    if reader is None:
        reader = _READERS[path] = SqlTickIO(path, reader_only=True)
    return reader


@dataclass(frozen=True)
class TickAnswer:
    """A solved tick in the forms the server stores and serves it, made where it was solved:
    the solved tick as JSON with its result's summary (models.result.result_summary: the
    queues' usage, the quota part, the solver's figures), the decisions as the write-back's
    rows, each waiting action's entry as JSON by id (models.encoded), and the whole result as
    text (models.result.result_text: the explanation worker's input, and what a PostgreSQL
    leader stores for its followers).

    The server decodes only the summary (a few queues' usage); decoding the whole result
    held its GIL for about 80 ms a tick at 10,000 queued, which requests then waited, even
    in lines of 128 (docs/benchmarks.md#service)."""

    solved: bytes
    rows: DecisionRows
    waiting: EncodedModels[WaitingAction]
    text: str

    @classmethod
    def of(cls, solved: SolvedTick) -> TickAnswer:
        result = solved.result
        waiting = encoded_waiting(result)
        summary = solved.model_copy(update={"result": result_summary(result)})
        return cls(
            solved=summary.model_dump_json().encode(),
            rows=DecisionRows.of(result),
            waiting=waiting,
            text=result_text(result, waiting),
        )

    def decode(self) -> tuple[SolvedTick, TickWriteBack]:
        """In the server (in a thread: the head explanations are a few models each)."""
        solved = SolvedTick.model_validate_json(self.solved)
        return solved, TickWriteBack(solved.result, self.rows, self.text)


def answer_tick(
    tick_fn: TickFn, snapshot: Snapshot, heads: HeadExplaining, keep_as: str | None = None
) -> TickAnswer:
    """`solve_tick`, answered in the forms the server keeps (`TickAnswer`)."""
    return TickAnswer.of(solve_tick(tick_fn, snapshot, heads, keep_as))


@dataclass(frozen=True)
class WorkerTick:
    """What the worker sends back (pickled): the answer; the store generation its snapshot
    was read at; and the rows it could not read, for the server (the writer) to fail."""

    answer: TickAnswer
    generation: int
    unreadable: dict[str, str]
    read_s: float


def solve_from_file(
    path: str,
    now: datetime,
    tick_fn: TickFn,
    heads: HeadExplaining,
    keep_as: str | None = None,
) -> WorkerTick:
    """`answer_tick` in the worker, on a snapshot it reads itself from the store's file
    (through connections that never write): the server then pays neither for reading the
    snapshot nor for sending it (both in the hundreds of milliseconds of its GIL at 10,000
    queued)."""
    started = time.perf_counter()
    planned, unreadable = _reader(path).read_tick_input_unchecked(now)
    read_s = time.perf_counter() - started
    return WorkerTick(
        answer=answer_tick(tick_fn, planned.snapshot, heads, keep_as),
        generation=planned.generation,
        unreadable=unreadable,
        read_s=read_s,
    )


def read_ahead(path: str, now: datetime) -> int:
    """Read the snapshot of the database at `path` as `solve_from_file` would, and solve
    nothing: this worker's reader then keeps every live action (a follower's, for the
    day it leads). Returns how many live actions it read."""
    planned, _ = _reader(path).read_tick_input_unchecked(now)
    return len(planned.snapshot.actions)


def explain_from_file(
    path: str, now: datetime, action_id: str, last_result: str | None, options: TickOptions
) -> str:
    """`explain_with_text` in a worker, on the store as of `now` read there, as JSON."""
    snapshot = _reader(path).read_snapshot(now)
    return explain_with_text(snapshot, action_id, last_result, options).model_dump_json()


def explain_with_text(
    snapshot: Snapshot, action_id: str, last_result: str | None, options: TickOptions
) -> Explanation:
    """`solver.explain.action.explain`, with the last tick's result as the server keeps it
    (models.result.result_text), compiling the snapshot with what this process's last
    explanation compiled (the worker's reader keeps unchanged actions as the same objects)."""
    result = read_result_text(last_result) if last_result else None
    with _EXPLANATIONS_COMPILED.lent() as kept:
        return explain(snapshot, action_id, result, options, kept=kept)


def explain_failure_from_file(
    path: str, now: datetime, action: Action, code: ErrorCode, message: str, options: TickOptions
) -> str:
    """`solver.explain.action.explain_failure` in a worker, on the store as of `now`."""
    snapshot = _reader(path).read_snapshot(now)
    return explain_failure_kept(snapshot, action, code, message, options).model_dump_json()


def explain_failure_kept(
    snapshot: Snapshot, action: Action, code: ErrorCode, message: str, options: TickOptions
) -> Explanation:
    """`solver.explain.action.explain_failure`, compiling the snapshot with what this
    process's last explanation compiled (as `explain_with_text`)."""
    with _EXPLANATIONS_COMPILED.lent() as kept:
        return explain_failure(snapshot, action, code, message, options, kept)


def explain_blocked_heads(
    snapshot: Snapshot,
    result: TickResult,
    heads: HeadExplaining,
    state: TickState | None = None,
) -> dict[str, Explanation]:
    """Each blocked head's explanation, in queue-name order until the budget is spent;
    `state`: the tick's own that made `result`, shared by their proofs (else each rebuilds
    it from the snapshot and the result)."""
    started = time.perf_counter()
    explanations: dict[str, Explanation] = {}
    for name, metrics in sorted(result.queues.items()):
        if not metrics.head_blocked or metrics.head_action is None:
            continue
        if time.perf_counter() - started >= heads.budget_s:
            break
        try:
            explanations[name] = explain(
                snapshot, metrics.head_action, result, heads.options, state
            )
        except SluiceError:
            continue  # the head is not in the snapshot: nothing to show
    return explanations
