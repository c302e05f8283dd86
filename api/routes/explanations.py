"""Explanations: why an action failed, why it waits, or where it runs (`solver.explain.action`).

`GET /actions/{id}/explanation` judges the action against the store as it is now,
with the last tick's decisions for the actions ahead of it (those it admitted are
running work by now). A queued action the service has not ticked yet is explained
after a tick of its own; a failed one against the queues and clusters of now.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter

from api.deps import PrincipalDep, StoreDep, TickerDep
from api.errors import error_responses
from api.schemas.actions import ActionExplanation
from api.schemas.queues import QueuePublic
from api.store.records import Phase, Store
from api.ticker import TickLoop
from models.errors import ErrorCode, FailedPrecondition, SluiceError
from solver.explain.action import explain, explain_failure

router = APIRouter(tags=["explanations"])

# Failures the scheduler decides; any other code came from an executor, at run time.
SCHEDULING_FAILURES = (
    ErrorCode.INFEASIBLE,
    ErrorCode.MAX_QUEUED_TIME_EXCEEDED,
    ErrorCode.DEADLINE_EXCEEDED,
)


@router.get(
    "/actions/{action_id}/explanation",
    response_model_exclude_none=True,
    responses=error_responses(404, 409),
)
def get_explanation(
    action_id: str, store: StoreDep, ticker: TickerDep, _: PrincipalDep
) -> ActionExplanation:
    """Why the action failed, why it waits (a minimal set of limits that keep it out, and
    what would let it in, with when it is expected to start), or where it runs."""
    return explain_action(store, ticker, action_id)


def explain_action(store: Store, ticker: TickLoop, action_id: str) -> ActionExplanation:
    record = store.get_action(action_id)
    if record.phase is Phase.FAILED and record.code in SCHEDULING_FAILURES:
        snapshot = store.read_snapshot(datetime.now(UTC))
        failure = explain_failure(snapshot, record.action, record.code, record.message or "")
        return ActionExplanation.of(failure, None)
    if not record.phase.live:
        detail = f" ({record.code}: {record.message})" if record.code else ""
        raise FailedPrecondition(
            f"action {action_id} is {record.phase.value}{detail}: explanations cover queued,"
            " scheduled, running and unschedulable actions"
        )
    explanation = explain(store.read_snapshot(datetime.now(UTC)), action_id, ticker.last_result)
    waiting = record.phase is Phase.QUEUED
    return ActionExplanation.of(explanation, ticker.forecasts.get(action_id) if waiting else None)


def with_head_explanation(view: QueuePublic, store: Store, ticker: TickLoop) -> QueuePublic:
    """A blocked strict_fifo queue shows why its head waits."""
    if not view.head_blocked or view.head_action is None:
        return view
    try:
        explanation = explain_action(store, ticker, view.head_action)
    except SluiceError:
        return view  # the head moved on since the last tick: nothing to show
    return view.model_copy(update={"head_explanation": explanation})
