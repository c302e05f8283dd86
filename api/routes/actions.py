"""Actions: submit one or a batch, get, list, cancel; executors report outcomes."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Response, status

from api.deps import (
    NEXT_PAGE_RESPONSE,
    ListingDep,
    PrincipalDep,
    StoreDep,
    TickerDep,
    created,
    paged,
)
from api.errors import error_responses
from api.moves import refuse_infeasible
from api.schemas.actions import (
    ActionBatch,
    ActionPublic,
    ActionsMove,
    ActionSubmit,
    BatchAccepted,
    Moved,
)
from api.schemas.common import ExecutorReport
from api.store.records import ActionRecord, Phase
from api.views import action_view
from models.snapshot import Snapshot

router = APIRouter(prefix="/actions", tags=["actions"])


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 404, 409, 429))
def submit_action(
    body: ActionSubmit, store: StoreDep, ticker: TickerDep, who: PrincipalDep, response: Response
) -> ActionPublic:
    """Queue one action. The reply comes once it is on disk.

    A full queue answers 429 RESOURCE_EXHAUSTED at once; a draining queue
    QUEUE_DRAINING; an unknown queue NOT_FOUND."""
    who.require_queue(body.queue, "submit")
    action = body.to_action(datetime.now(UTC))
    store.submit([action])
    created(response, "actions", action.id)
    return action_view(ActionRecord.submitted(action), ticker)


@router.post(
    "/batch",
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(403, 404, 409, 429),
)
def submit_batch(body: ActionBatch, store: StoreDep, who: PrincipalDep) -> BatchAccepted:
    """Queue many actions, all or none, in arrival order."""
    for queue in sorted({submission.queue for submission in body.actions}):
        who.require_queue(queue, "submit")
    now = datetime.now(UTC)
    actions = [
        submission.to_action(now, ("actions", index))
        for index, submission in enumerate(body.actions)
    ]
    store.submit(actions)
    return BatchAccepted(ids=[action.id for action in actions])


@router.post("/move", responses=error_responses(403, 404, 409, 429))
def move_actions(body: ActionsMove, store: StoreDep, who: PrincipalDep) -> Moved:
    """Move waiting actions to another queue, all or none, keeping their arrival order.

    Refused (FAILED_PRECONDITION) if one is not waiting, runs in a reusable environment, or
    could never run on the destination (its caps or clusters); rights on every source
    queue and on the destination are needed."""
    who.require_queue(body.to, "move actions to")

    def check(sources: set[str], destination: Snapshot) -> None:
        for source in sorted(sources):
            who.require_queue(source, "move actions from")
        refuse_infeasible(destination)

    moved = store.move_actions(body.to, datetime.now(UTC), check, ids=body.ids)
    return Moved(to=body.to, ids=[record.action.id for record in moved])


@router.get("", responses=NEXT_PAGE_RESPONSE)
def list_actions(
    store: StoreDep,
    ticker: TickerDep,
    _: PrincipalDep,
    listing: ListingDep,
    response: Response,
    queue: str | None = None,
    state: Phase | None = None,
    cluster: str | None = None,
    run: str | None = None,
) -> list[ActionPublic]:
    """In arrival order (`order=desc`: newest first), a page at a time: a `Next-Page-Token`
    header means there is more. Executors poll `state=scheduled` (and `cluster=`) for work."""
    page = store.list_actions(queue=queue, phase=state, cluster=cluster, run=run, listing=listing)
    paged(page.next_after, listing, response)
    return [action_view(record, ticker) for record in page.items]


@router.get("/{action_id}", responses=error_responses(404))
def get_action(action_id: str, store: StoreDep, ticker: TickerDep, _: PrincipalDep) -> ActionPublic:
    return action_view(store.get_action(action_id), ticker)


@router.post("/{action_id}/cancel", responses=error_responses(403, 404, 409))
def cancel_action(
    action_id: str, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> ActionPublic:
    """A queued action leaves the line; a scheduled or running one frees its charges."""
    who.require_queue(store.get_action(action_id).action.queue, "cancel")
    return action_view(store.cancel_action(action_id, datetime.now(UTC)), ticker)


@router.post("/{action_id}/report", responses=error_responses(403, 404, 409))
def report_action(
    action_id: str, body: ExecutorReport, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> ActionPublic:
    """An executor's report: started, succeeded or failed. Finishing frees the charges."""
    who.require_executor("report action outcomes")
    record = store.report(action_id, body.outcome, datetime.now(UTC), body.code, body.message)
    return action_view(record, ticker)
