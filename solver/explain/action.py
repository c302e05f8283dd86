"""Explanations: why an action failed, why it waits, or where it runs, and what would let it run.

    from solver.explain.action import explain
    explanation = explain(snapshot, "train", result)   # result: that snapshot's TickResult

- failed INFEASIBLE: every reason it can never run, for its queue and every cluster the
  queue routes to, and checked fixes (solver.explain.infeasible);
- waiting: a minimal set of the limits that keep it out now, found by CP-SAT with
  assumption literals over the world the tick left ahead of it, and the cheapest fix
  (solver.explain.core_model, solver.explain.waiting);
- scheduled or running: where.

Without `result`, the tick is run first. `result` may also be the tick before this snapshot
was read, as in the service: its admissions are then running work of the snapshot, and only
its refusals matter. Every suggestion is proven by re-running the tick with it
(solver.explain.replay) before it is offered.
"""

from __future__ import annotations

from datetime import datetime

from models.construct import collections_deferred
from models.errors import ErrorCode, NotFound
from models.explanation import Explanation, ExplanationState
from models.result import TickResult
from models.snapshot import Action, ActionState, Snapshot
from solver.explain.infeasible import explain_failed, failure_alone
from solver.explain.replay import Replayer
from solver.explain.waiting import explain_waiting
from solver.placement.failfast import Failure
from solver.placement.problem import CompileCache
from solver.placement.resume import TickState
from solver.tick import TickOptions, tick_with_state


def explain(
    snapshot: Snapshot,
    action_id: str,
    result: TickResult | None = None,
    options: TickOptions | None = None,
    state: TickState | None = None,
    kept: CompileCache | None = None,
) -> Explanation:
    """`state`: the tick's own that made `result` (solver.tick.tick_with_state), which
    proofs resume from; without it, it is rebuilt from `result` when a proof needs it,
    compiling the snapshot with what `kept` holds of the explanations before (a process that
    explains one fleet's actions one after another keeps one, as the service's worker does)."""
    # As in solver.tick: replays make many short-lived objects and no cycles worth
    # collecting, and a collection walks the whole snapshot's object graph each time.
    with collections_deferred():
        return _explain(snapshot, action_id, result, options, state, kept)


def _explain(
    snapshot: Snapshot,
    action_id: str,
    result: TickResult | None,
    options: TickOptions | None,
    state: TickState | None,
    kept: CompileCache | None,
) -> Explanation:
    action = _find(snapshot, action_id, state)
    if action is None:
        raise NotFound(f"no action {action_id!r} in the snapshot")
    if action.state is ActionState.RUNNING:
        placement = action.placement
        spots = [(c.name, c.node_pool, c.node) for c in placement.containers] if placement else []
        cluster = placement.cluster if placement else None
        return _placed(action, cluster, spots, "runs", snapshot.now)
    options = options or TickOptions()
    if result is None:
        result, state = tick_with_state(snapshot, options, kept)
    replayer = Replayer(snapshot, action_id, result, options, state, kept)
    decided = replayer.decided
    scheduled = decided.scheduled.get(action_id)
    if scheduled is not None:
        spots = [(c.name, c.node_pool, c.node) for c in scheduled.containers]
        return _placed(action, scheduled.cluster, spots, "is scheduled", snapshot.now)
    failed = decided.failed.get(action_id)
    if failed is not None:
        return explain_failed(snapshot, action, Failure(failed.code, failed.message), replayer)
    # Not decided by this result (submitted after it, in the service): judge it alone first.
    if action_id not in decided.waiting:
        failure = failure_alone(snapshot, action)
        if failure is not None:
            return explain_failed(snapshot, action, failure, replayer)
    return explain_waiting(snapshot, action_id, result, replayer)


def _find(snapshot: Snapshot, action_id: str, state: TickState | None) -> Action | None:
    """The snapshot's action of that id: a pending one found by its place in the tick's line
    when the tick's state is at hand (compiled from this snapshot), instead of a search."""
    if state is not None:
        position = state.problem.positions().get(action_id)
        if position is not None:
            return state.pending(snapshot)[position]
    return next((a for a in snapshot.actions if a.id == action_id), None)


def explain_failure(
    snapshot: Snapshot,
    action: Action,
    code: ErrorCode,
    message: str,
    options: TickOptions | None = None,
    kept: CompileCache | None = None,
) -> Explanation:
    """A failure recorded elsewhere (the service's store), judged against `snapshot`'s
    queues and clusters; the action need not be in the snapshot. Its fixes are proven on
    the snapshot with the action queued again, by a tick of the whole line, compiled with
    `kept` (as in `explain`)."""
    queued = action.model_copy(update={"state": ActionState.QUEUED, "placement": None})
    others = [a for a in snapshot.actions if a.id != action.id]
    again = snapshot.model_copy(update={"actions": [*others, queued]})
    replayer = Replayer(again, action.id, None, options or TickOptions(), kept=kept)
    return explain_failed(again, queued, Failure(code, message), replayer)


Spots = list[tuple[str, str, int]]  # (container, node pool, node)


def _placed(
    action: Action, cluster: str | None, spots: Spots, verb: str, now: datetime
) -> Explanation:
    if cluster is None:
        where = (
            f"in the running pool of environment {action.environment}"
            if action.environment
            else "without a placement"
        )
    else:
        on = ", ".join(f"container {name} on pool {pool} node {node}" for name, pool, node in spots)
        where = f"on cluster {cluster}: {on}"
    return Explanation(
        action=action.id,
        queue=action.queue,
        state=ExplanationState.SCHEDULED,
        code="scheduled",
        message=f"{action.id} {verb} {where}; it fits under every cap and limit of queue"
        f" {action.queue} with the work ahead of it",
        cluster=cluster,
        as_of=now,
    )
