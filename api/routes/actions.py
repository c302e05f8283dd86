"""Actions: submit one or a batch, get, list, cancel; executors report outcomes."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from api.auth import Principal
from api.deps import (
    NEXT_PAGE_RESPONSE,
    ActionId,
    ListingDep,
    PrincipalDep,
    StoreDep,
    SubmissionsDep,
    TickerDep,
    created,
    json_reply,
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
from api.store.records import ActionRecord, Phase, Routing, Store, Submission
from api.views import action_view
from models.errors import InvalidInput
from models.snapshot import Action, Snapshot
from models.tasks import QueueSource, TaskTemplate, resolve_queue

router = APIRouter(prefix="/actions", tags=["actions"])


def _route(
    submissions: list[ActionSubmit], store: Store, who: Principal, now: datetime
) -> Submission:
    """Each submission's action on its resolved queue (invocation > run > task > environment
    > default, models.tasks.resolve_queue), rights checked on that queue. A run's queue is
    the one a submission of this batch gives it, else the one it was created with."""
    # Rights on a named queue come before any look-up, so a refusal does not tell what exists.
    for named in sorted({s.queue for s in submissions if s.queue is not None}):
        who.require_queue(named, "submit")
    given: dict[str, str] = {}
    for index, submission in enumerate(submissions):
        run = submission.run or submission.id
        if submission.run_queue is None:
            continue
        if run is None:
            raise InvalidInput(
                "run_queue needs a run (or an id, which names a run of one action)",
                field=f"actions.{index}.run_queue" if len(submissions) > 1 else "run_queue",
            )
        if given.setdefault(run, submission.run_queue) != submission.run_queue:
            raise InvalidInput(
                f"run {run} is given two queues in one submission", field="run_queue"
            )
    tasks: dict[str, TaskTemplate] = {}
    environments: dict[str, str] = {}
    actions: list[Action] = []
    sources: dict[str, QueueSource] = {}
    for index, submission in enumerate(submissions):
        task = None
        if submission.task is not None:
            if submission.task not in tasks:
                tasks[submission.task] = store.get_task(submission.task)
            task = tasks[submission.task]
        if submission.queue is not None:  # the invocation wins: no other level is read
            queue, source = submission.queue, QueueSource.INVOCATION
        else:
            run = submission.run or submission.id
            run_queue = given.get(run) if run is not None else None
            if run_queue is None and run is not None:
                run_queue = store.run_queue(run)
            environment = submission.environment_of(task)
            if environment is not None and environment not in environments:
                environments[environment] = store.get_environment(environment).environment.queue
            if environment is not None:
                environment_queue: str | None = environments[environment]
            else:
                environment_queue = None if task is None else task.environment_queue
            queue, source = resolve_queue(
                run_queue, None if task is None else task.queue, environment_queue
            )
            who.require_queue(queue, "submit")
        where = ("actions", index) if len(submissions) > 1 else ()
        action = submission.to_action(now, queue, task, where)
        actions.append(action)
        sources[action.id] = source
    return Submission(actions, Routing(sources=sources, run_queues=given))


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ActionPublic,
    responses=error_responses(403, 404, 409, 429),
)
async def submit_action(
    body: ActionSubmit, submissions: SubmissionsDep, ticker: TickerDep, who: PrincipalDep
) -> Response:
    """Queue one action. The reply comes once it is on disk.

    A full queue answers 429 RESOURCE_EXHAUSTED at once; a draining queue
    QUEUE_DRAINING; an unknown queue NOT_FOUND. Without a queue it goes where its run, task
    or environment routes it, or else to the default queue (`queue_source` says which)."""
    stored = await submissions.submit(
        functools.partial(_route, [body], submissions.store, who, datetime.now(UTC))
    )
    (action,) = stored.actions
    view = action_view(ActionRecord.submitted(action, stored.routing.sources[action.id]), ticker)
    reply = json_reply(view)
    created(reply, "actions", action.id)
    return reply


@router.post(
    "/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=BatchAccepted,
    responses=error_responses(403, 404, 409, 429),
)
async def submit_batch(
    body: ActionBatch, submissions: SubmissionsDep, who: PrincipalDep
) -> Response:
    """Queue many actions, all or none, in arrival order; each routed as `POST /actions`."""
    stored = await submissions.submit(
        functools.partial(_route, body.actions, submissions.store, who, datetime.now(UTC))
    )
    accepted = BatchAccepted(ids=[action.id for action in stored.actions])
    return json_reply(accepted, status.HTTP_201_CREATED)


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
    queue: Annotated[str | None, Query(description="Only this queue's actions.")] = None,
    state: Annotated[Phase | None, Query(description="Only actions in this state.")] = None,
    cluster: Annotated[
        str | None, Query(description="Only actions placed on this cluster.")
    ] = None,
    run: Annotated[str | None, Query(description="Only this run's actions.")] = None,
) -> list[ActionPublic]:
    """In arrival order (`order=desc`: newest first), a page at a time: a `Next-Page-Token`
    header means there is more. Executors poll `state=scheduled` (and `cluster=`) for work."""
    page = store.list_actions(queue=queue, phase=state, cluster=cluster, run=run, listing=listing)
    paged(page.next_after, listing, response)
    return [action_view(record, ticker) for record in page.items]


@router.get("/{action_id}", response_model=ActionPublic, responses=error_responses(404))
def get_action(
    action_id: ActionId, store: StoreDep, ticker: TickerDep, _: PrincipalDep
) -> Response:
    return json_reply(action_view(store.get_action(action_id), ticker))


@router.post("/{action_id}/cancel", responses=error_responses(403, 404, 409))
def cancel_action(
    action_id: ActionId, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> ActionPublic:
    """A queued action leaves the line; a scheduled or running one frees its charges."""
    who.require_queue(store.get_action(action_id).action.queue, "cancel")
    return action_view(store.cancel_action(action_id, datetime.now(UTC)), ticker)


@router.post("/{action_id}/report", responses=error_responses(403, 404, 409))
def report_action(
    action_id: ActionId, body: ExecutorReport, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> ActionPublic:
    """An executor's report: started, succeeded or failed. Finishing frees the charges."""
    who.require_executor("report action outcomes")
    record = store.report(action_id, body.outcome, datetime.now(UTC), body.code, body.message)
    return action_view(record, ticker)
