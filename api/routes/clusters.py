"""Clusters and their node pools: what the tick places work on."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import CREATED_RESPONSE, ClusterName, PrincipalDep, StoreDep, created, exists
from api.errors import error_responses
from models.errors import InvalidInput
from models.snapshot import Cluster

router = APIRouter(prefix="/clusters", tags=["clusters"])


@router.put("/{name}", responses={**error_responses(403, 409), **CREATED_RESPONSE})
def put_cluster(
    name: ClusterName, body: Cluster, store: StoreDep, who: PrincipalDep, response: Response
) -> Cluster:
    """Create or replace a cluster's node pools; the next tick plans against them."""
    who.require_admin("change clusters")
    if body.name != name:
        raise InvalidInput(f"name: body names {body.name!r}, the path {name!r}", field="name")
    new = not exists(store.get_cluster, name)
    store.put_cluster(body)
    if new:
        created(response, "clusters", name)
    return body


@router.get("")
def list_clusters(store: StoreDep, _: PrincipalDep) -> list[Cluster]:
    return store.list_clusters()


@router.get("/{name}", responses=error_responses(404))
def get_cluster(name: ClusterName, store: StoreDep, _: PrincipalDep) -> Cluster:
    return store.get_cluster(name)


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(403, 404, 409),
)
def delete_cluster(name: ClusterName, store: StoreDep, who: PrincipalDep) -> None:
    """Refused while a queue routes to it or work is placed on it."""
    who.require_admin("delete clusters")
    store.delete_cluster(name)
