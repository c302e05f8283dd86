"""Clusters with their node pools, organization settings, reusable environments."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import PrincipalDep, StoreDep
from api.schemas import EnvironmentIn
from models.errors import InvalidInput
from models.snapshot import Cluster, Environment, Settings

router = APIRouter(tags=["fleet"])


@router.put("/clusters/{name}")
def put_cluster(name: str, body: Cluster, store: StoreDep, who: PrincipalDep) -> Cluster:
    """Create or replace a cluster's node pools; the next tick plans against them."""
    who.require_admin("change clusters")
    if body.name != name:
        raise InvalidInput(f"name: body names {body.name!r}, the path {name!r}", field="name")
    store.put_cluster(body)
    return body


@router.get("/clusters")
def list_clusters(store: StoreDep, _: PrincipalDep) -> list[Cluster]:
    return store.list_clusters()


@router.get("/clusters/{name}")
def get_cluster(name: str, store: StoreDep, _: PrincipalDep) -> Cluster:
    return store.get_cluster(name)


@router.delete("/clusters/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_cluster(name: str, store: StoreDep, who: PrincipalDep) -> None:
    who.require_admin("delete clusters")
    store.delete_cluster(name)


@router.get("/settings")
def get_settings(store: StoreDep, _: PrincipalDep) -> Settings:
    return store.get_settings()


@router.put("/settings")
def put_settings(body: Settings, store: StoreDep, who: PrincipalDep) -> Settings:
    who.require_admin("change organization settings")
    store.put_settings(body)
    return body


@router.put("/environments/{name}")
def put_environment(
    name: str, body: EnvironmentIn, store: StoreDep, who: PrincipalDep
) -> Environment:
    """Define a reusable pool; its first action starts it, charged once at this size."""
    who.require_queue(body.queue, "define environments")
    return store.put_environment(body.to_environment(name)).environment


@router.get("/environments")
def list_environments(store: StoreDep, _: PrincipalDep) -> list[Environment]:
    return [record.environment for record in store.list_environments()]


@router.get("/environments/{name}")
def get_environment(name: str, store: StoreDep, _: PrincipalDep) -> Environment:
    return store.get_environment(name).environment


@router.post("/environments/{name}/stop")
def stop_environment(name: str, store: StoreDep, who: PrincipalDep) -> Environment:
    """The pool's containers shut down (an executor's report); its charges are freed."""
    who.require_executor("stop environments")
    return store.stop_environment(name).environment
