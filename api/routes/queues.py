"""Queues: create, update (partial, clearing caps), get with metrics, list, drain, delete."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from api.deps import PrincipalDep, QueueName, StoreDep, TickerDep, created, json_reply
from api.errors import error_responses
from api.moves import parse_filter, refuse_infeasible
from api.schemas.actions import Moved, QueueMove
from api.schemas.queues import QueueCreate, QueuePublic, QueueUpdate
from api.views import queue_view, queue_views
from models.snapshot import Snapshot

router = APIRouter(prefix="/queues", tags=["queues"])


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 409))
def create_queue(
    body: QueueCreate, store: StoreDep, ticker: TickerDep, who: PrincipalDep, response: Response
) -> QueuePublic:
    who.require_admin("create queues")
    store.create_queue(body.to_queue())
    created(response, "queues", body.name)
    return queue_view(store, ticker, body.name)


@router.get("", response_model=list[QueuePublic])
def list_queues(
    store: StoreDep,
    ticker: TickerDep,
    _: PrincipalDep,
    # A list, never null: a query string has no null, and the document says what it takes.
    pool: Annotated[
        list[str], Query(default_factory=list, description="only queues in these pools")
    ],
) -> Response:
    return json_reply(queue_views(store, ticker, pool))


@router.get("/{name}", response_model=QueuePublic, responses=error_responses(404))
def get_queue(name: QueueName, store: StoreDep, ticker: TickerDep, _: PrincipalDep) -> Response:
    """A blocked strict_fifo head comes with the explanation its tick computed (no solve)."""
    return json_reply(queue_view(store, ticker, name))


@router.patch("/{name}", responses=error_responses(403, 404))
def update_queue(
    name: QueueName, body: QueueUpdate, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> QueuePublic:
    """Changes apply to the live queue from the next tick on."""
    who.require_admin("change queues")
    store.update_queue(name, body.changes())
    return queue_view(store, ticker, name)


@router.post("/{name}/drain", responses=error_responses(403, 404))
def drain_queue(
    name: QueueName, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> QueuePublic:
    """Accept nothing new; what the queue holds still runs."""
    who.require_admin("drain queues")
    store.set_draining(name, True)
    return queue_view(store, ticker, name)


@router.post("/{name}/undrain", responses=error_responses(403, 404))
def undrain_queue(
    name: QueueName, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> QueuePublic:
    """Accept submissions again."""
    who.require_admin("undrain queues")
    store.set_draining(name, False)
    return queue_view(store, ticker, name)


@router.post("/{name}/move", responses=error_responses(403, 404, 409, 429))
def move_queue(name: QueueName, body: QueueMove, store: StoreDep, who: PrincipalDep) -> Moved:
    """Move the queue's waiting actions (those `where` keeps) to queue `to`, all or none,
    keeping their arrival order; rights on both queues are needed."""
    who.require_queue(name, "move actions from")
    who.require_queue(body.to, "move actions to")
    where = parse_filter(body.where) if body.where is not None else None

    def check(_: set[str], destination: Snapshot) -> None:
        refuse_infeasible(destination)

    moved = store.move_actions(body.to, datetime.now(UTC), check, source=name, where=where)
    return Moved(to=body.to, ids=[record.action.id for record in moved])


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(403, 404, 409),
)
def delete_queue(name: QueueName, store: StoreDep, who: PrincipalDep) -> None:
    """Only an empty queue can go; the default queue always stays."""
    who.require_admin("delete queues")
    store.delete_queue(name)
