"""Triggers: scheduled runs sent to a queue. Each firing submits the trigger's actions as a
new run, as a submission would (depth, draining and environments are checked then).

Creating, changing, pausing and deleting a trigger needs rights on its queue (an admin,
or a submitter granted it); moving it to another queue, rights on both."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, status

from api.auth import Principal
from api.deps import PrincipalDep, StoreDep, TriggerName
from api.errors import error_responses
from api.schemas.triggers import TriggerCreate, TriggerPublic, TriggerUpdate
from api.store.records import Store
from models.triggers import Trigger

router = APIRouter(prefix="/triggers", tags=["triggers"])


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 404, 409))
def create_trigger(body: TriggerCreate, store: StoreDep, who: PrincipalDep) -> TriggerPublic:
    """A fixed rate counts from now: its first run comes one period on."""
    who.require_queue(body.queue, "create triggers")
    return TriggerPublic.of(store.create_trigger(body.to_trigger(), datetime.now(UTC)))


@router.get("")
def list_triggers(store: StoreDep, _: PrincipalDep) -> list[TriggerPublic]:
    return [TriggerPublic.of(record) for record in store.list_triggers()]


@router.get("/{name}", responses=error_responses(404))
def get_trigger(name: TriggerName, store: StoreDep, _: PrincipalDep) -> TriggerPublic:
    """Its schedule, next time and history of firings (newest first)."""
    return TriggerPublic.of(store.get_trigger(name))


def _change(store: Store, who: Principal, name: str, new: Trigger) -> TriggerPublic:
    current = store.get_trigger(name).trigger
    who.require_queue(current.queue, f"change trigger {name}, which is")
    if new.queue != current.queue:
        who.require_queue(new.queue, f"move trigger {name}")
    return TriggerPublic.of(store.replace_trigger(new, datetime.now(UTC)))


@router.patch("/{name}", responses=error_responses(403, 404))
def update_trigger(
    name: TriggerName, body: TriggerUpdate, store: StoreDep, who: PrincipalDep
) -> TriggerPublic:
    """A changed schedule plans its next time again from now."""
    return _change(store, who, name, body.apply(store.get_trigger(name).trigger))


@router.post("/{name}/pause", responses=error_responses(403, 404))
def pause_trigger(name: TriggerName, store: StoreDep, who: PrincipalDep) -> TriggerPublic:
    """No firing until resumed; times passing meanwhile are not caught up."""
    current = store.get_trigger(name).trigger
    return _change(store, who, name, current.model_copy(update={"paused": True}))


@router.post("/{name}/resume", responses=error_responses(403, 404))
def resume_trigger(name: TriggerName, store: StoreDep, who: PrincipalDep) -> TriggerPublic:
    """Fire again from the next scheduled time after now."""
    current = store.get_trigger(name).trigger
    return _change(store, who, name, current.model_copy(update={"paused": False}))


@router.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404)
)
def delete_trigger(name: TriggerName, store: StoreDep, who: PrincipalDep) -> None:
    """The trigger and its history go; the runs it submitted stay."""
    who.require_queue(store.get_trigger(name).trigger.queue, f"delete trigger {name}, which is")
    store.delete_trigger(name)
