"""What the Clusters page draws: the accelerators in use on every node, from the store."""

from __future__ import annotations

from pydantic import BaseModel, Field

from models.snapshot import Container, Placement, Snapshot


class NodeAllocation(BaseModel):
    node: int = Field(description="The node's index in its pool, from 0.")
    accelerators_used: int = Field(description="Devices of the node that placed work holds.")
    actions: list[str] = Field(description="actions and environments placed on the node")


class PoolAllocation(BaseModel):
    cluster: str = Field(description="The cluster.")
    node_pool: str = Field(description="The node pool.")
    accelerator: str | None = Field(description="The device each node carries; null: none.")
    accelerators_per_node: int = Field(description="Devices on each node.")
    nodes: int = Field(description="Nodes up now.")
    max_nodes: int = Field(description="Nodes at full scale.")
    per_node: list[NodeAllocation] = Field(description="every node up to full scale")


def pool_allocations(snapshot: Snapshot) -> list[PoolAllocation]:
    """Per node, the accelerators that placed work (scheduled or running actions, started
    environments) holds. Work holding a node index past a pool's full scale is not drawn."""
    held: dict[tuple[str, str, int], list[tuple[str, int]]] = {}

    def charge(owner: str, containers: list[Container], placement: Placement) -> None:
        requests = {container.name: container for container in containers}
        for spot in placement.containers:
            container = requests.get(spot.name)
            count = container.gpu.count if container and container.gpu else 0
            key = (placement.cluster, spot.node_pool, spot.node)
            held.setdefault(key, []).append((owner, count))

    for action in snapshot.actions:
        if action.placement is not None:
            charge(action.id, action.containers, action.placement)
    for environment in snapshot.environments:
        if environment.running and environment.placement is not None:
            charge(environment.name, environment.replica_containers(), environment.placement)
    pools = []
    for cluster in snapshot.clusters:
        for pool in cluster.node_pools:
            per_node = []
            for node in range(pool.full_scale):
                owners = held.get((cluster.name, pool.name, node), [])
                per_node.append(
                    NodeAllocation(
                        node=node,
                        accelerators_used=sum(count for _, count in owners),
                        actions=sorted({owner for owner, _ in owners}),
                    )
                )
            pools.append(
                PoolAllocation(
                    cluster=cluster.name,
                    node_pool=pool.name,
                    accelerator=pool.node.accelerator,
                    accelerators_per_node=pool.node.accelerators,
                    nodes=pool.nodes,
                    max_nodes=pool.full_scale,
                    per_node=per_node,
                )
            )
    return pools
