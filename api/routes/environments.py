"""Reusable environments: warm container pools charged once when they start."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import CREATED_RESPONSE, EnvironmentName, PrincipalDep, StoreDep, created
from api.errors import error_responses
from api.schemas.environments import EnvironmentIn, EnvironmentPublic
from models.errors import NotFound

router = APIRouter(prefix="/environments", tags=["environments"])


@router.put("/{name}", responses={**error_responses(403, 404, 409), **CREATED_RESPONSE})
def put_environment(
    name: EnvironmentName,
    body: EnvironmentIn,
    store: StoreDep,
    who: PrincipalDep,
    response: Response,
) -> EnvironmentPublic:
    """Define a reusable pool; its first action starts it, charged once at this size.

    Changing one needs rights on the queue it belongs to now as well as on the one the body
    names: a team may not take over, move or resize another team's pool."""
    try:
        current: str | None = store.get_environment(name).environment.queue
    except NotFound:
        current = None
    if current is not None:
        who.require_queue(current, f"change environment {name}, which is")
    who.require_queue(body.queue, "define environments")
    record = store.put_environment(body.to_environment(name), body.idle_timeout_of())
    if current is None:
        created(response, "environments", name)
    return EnvironmentPublic.of(record)


@router.get("")
def list_environments(store: StoreDep, _: PrincipalDep) -> list[EnvironmentPublic]:
    return [EnvironmentPublic.of(record) for record in store.list_environments()]


@router.get("/{name}", responses=error_responses(404))
def get_environment(name: EnvironmentName, store: StoreDep, _: PrincipalDep) -> EnvironmentPublic:
    return EnvironmentPublic.of(store.get_environment(name))


@router.post("/{name}/stop", responses=error_responses(403, 404, 409))
def stop_environment(
    name: EnvironmentName, store: StoreDep, who: PrincipalDep
) -> EnvironmentPublic:
    """The pool's containers shut down (an executor's report); its charges are freed."""
    who.require_executor("stop environments")
    return EnvironmentPublic.of(store.stop_environment(name))
