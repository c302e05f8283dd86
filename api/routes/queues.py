"""Queues: create, update (partial, clearing caps), get with metrics, list, drain, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from api.deps import PrincipalDep, StoreDep, TickerDep
from api.errors import error_responses
from api.routes.explanations import with_head_explanation
from api.schemas.queues import QueueCreate, QueuePublic, QueueUpdate
from api.views import queue_view, queue_views

router = APIRouter(prefix="/queues", tags=["queues"])


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 409))
def create_queue(
    body: QueueCreate, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> QueuePublic:
    who.require_admin("create queues")
    store.create_queue(body.to_queue())
    return queue_view(store, ticker, body.name)


@router.get("")
def list_queues(
    store: StoreDep,
    ticker: TickerDep,
    _: PrincipalDep,
    # A list, never null: a query string has no null, and the document says what it takes.
    pool: Annotated[
        list[str], Query(default_factory=list, description="only queues in these pools")
    ],
) -> list[QueuePublic]:
    return queue_views(store, ticker, pool)


@router.get("/{name}", responses=error_responses(404))
def get_queue(name: str, store: StoreDep, ticker: TickerDep, _: PrincipalDep) -> QueuePublic:
    return with_head_explanation(queue_view(store, ticker, name), store, ticker)


@router.patch("/{name}", responses=error_responses(403, 404))
def update_queue(
    name: str, body: QueueUpdate, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> QueuePublic:
    """Changes apply to the live queue from the next tick on."""
    who.require_admin("change queues")
    store.update_queue(name, body.changes())
    return queue_view(store, ticker, name)


@router.post("/{name}/drain", responses=error_responses(403, 404))
def drain_queue(name: str, store: StoreDep, ticker: TickerDep, who: PrincipalDep) -> QueuePublic:
    """Accept nothing new; what the queue holds still runs."""
    who.require_admin("drain queues")
    store.set_draining(name, True)
    return queue_view(store, ticker, name)


@router.post("/{name}/undrain", responses=error_responses(403, 404))
def undrain_queue(name: str, store: StoreDep, ticker: TickerDep, who: PrincipalDep) -> QueuePublic:
    """Accept submissions again."""
    who.require_admin("undrain queues")
    store.set_draining(name, False)
    return queue_view(store, ticker, name)


@router.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(403, 404, 409),
)
def delete_queue(name: str, store: StoreDep, who: PrincipalDep) -> None:
    """Only an empty queue can go; the default queue always stays."""
    who.require_admin("delete queues")
    store.delete_queue(name)
