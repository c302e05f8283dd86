"""Fluent builders for snapshots, so a test reads like the situation it sets up.

The builder writes the scenario-file form (the same spellings a fixture uses) and
validates it through `snapshot_from_dict`, so what a test builds is exactly what a
scenario file with the same content would load into.

    snap = (
        SnapshotBuilder()
        .queue("research", max_gpus=8, scheduling="strict_fifo")
        .cluster("east")
        .pool("a100", cpu="96", memory="1Ti", accelerator="A100", accelerators=8, nodes=2)
        .running("old", queue="research", gpu=6, on=("east", "a100", 0))
        .queued("train", queue="research", gpu=4)
        .build()
    )
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Self

from models.scenario import dump_scenario, snapshot_from_dict
from models.snapshot import Snapshot

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

Json = dict[str, Any]


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def ctr(
    name: str = "main",
    *,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    gpu: str | int | None = None,
    selector: dict[str, str] | None = None,
    **other: str,
) -> Json:
    """One container in scenario form; `None` leaves a resource unrequested."""
    resources: Json = {"cpu": cpu, "memory": memory, **other}
    resources = {key: value for key, value in resources.items() if value is not None}
    if gpu is not None:
        resources["gpu"] = gpu
    container: Json = {"name": name, "resources": resources}
    if selector:
        container["node_selector"] = dict(selector)
    return container


class SnapshotBuilder:
    """Accumulates a scenario; actions get increasing submission times in call order."""

    def __init__(self, now: datetime = NOW, *, first_submission: timedelta | None = None) -> None:
        self._now = now
        self._next_submission = now - (first_submission or timedelta(hours=1))
        self._data: Json = {
            "now": stamp(now),
            "settings": {},
            "queues": [],
            "clusters": [],
            "actions": [],
            "environments": [],
        }

    # -- organisation and queues -------------------------------------------------

    def default_gpu_type(self, device: str | None) -> Self:
        self._data["settings"]["default_gpu_type"] = device
        return self

    def queue(self, name: str, **settings: Any) -> Self:
        """A queue with the seed's `Queue.create` keywords (max_gpus=8, scheduling=...)."""
        self._data["queues"].append({"name": name, **settings})
        return self

    # -- clusters ----------------------------------------------------------------

    def cluster(self, name: str) -> Self:
        """Start a cluster; the following `pool` calls add node pools to it."""
        self._data["clusters"].append({"name": name, "node_pools": []})
        return self

    def pool(
        self,
        name: str,
        *,
        cpu: str,
        memory: str,
        accelerator: str | None = None,
        accelerators: int = 0,
        labels: dict[str, str] | None = None,
        nodes: int = 1,
        max_nodes: int | None = None,
        resources: dict[str, str] | None = None,
    ) -> Self:
        """`resources` are the other named resources one node offers (ephemeral-storage...)."""
        node: Json = {"cpu": cpu, "memory": memory}
        if resources:
            node["resources"] = dict(resources)
        if accelerator is not None:
            node |= {"accelerator": accelerator, "accelerators": accelerators}
        pool: Json = {"name": name, "node": node, "labels": dict(labels or {}), "nodes": nodes}
        if max_nodes is not None:
            pool["max_nodes"] = max_nodes
        self._data["clusters"][-1]["node_pools"].append(pool)
        return self

    # -- actions -----------------------------------------------------------------

    def queued(
        self,
        action_id: str,
        *,
        queue: str = "default",
        run: str | None = None,
        at: datetime | None = None,
        containers: list[Json] | None = None,
        environment: str | None = None,
        max_queued_time: str | None = None,
        deadline: str | None = None,
        **single: Any,
    ) -> Self:
        """A pending action; `cpu=`, `memory=`, `gpu=`, `selector=` describe one container."""
        action = self._action(action_id, queue, run, at, containers, environment, single)
        action["state"] = "queued"
        if max_queued_time is not None:
            action["max_queued_time"] = max_queued_time
        if deadline is not None:
            action["deadline"] = deadline
        self._data["actions"].append(action)
        return self

    def running(
        self,
        action_id: str,
        *,
        on: tuple[str, str, int] | tuple[str, list[tuple[str, int]]] | None = None,
        queue: str = "default",
        run: str | None = None,
        at: datetime | None = None,
        containers: list[Json] | None = None,
        environment: str | None = None,
        **single: Any,
    ) -> Self:
        """A running action placed `on=(cluster, pool, node)`, or `(cluster, [(pool, node)...])`
        with one spot per container; actions in an environment have no placement."""
        action = self._action(action_id, queue, run, at, containers, environment, single)
        action["state"] = "running"
        if on is not None:
            action["placement"] = _placement(on, action["containers"])
        self._data["actions"].append(action)
        return self

    def environment(
        self,
        name: str,
        *,
        queue: str = "default",
        replicas: int = 1,
        on: tuple[str, str, int] | tuple[str, list[tuple[str, int]]] | None = None,
        **single: Any,
    ) -> Self:
        """A reusable pool; give `on=` to make it running (one spot per replica)."""
        container = ctr(**single)
        env: Json = {"name": name, "queue": queue, "replicas": replicas}
        env["resources"] = container["resources"]
        if "node_selector" in container:
            env["node_selector"] = container["node_selector"]
        if on is not None:
            replicas_named = [{"name": f"replica-{i}"} for i in range(replicas)]
            env |= {"running": True, "placement": _placement(on, replicas_named)}
        self._data["environments"].append(env)
        return self

    # -- output ------------------------------------------------------------------

    def data(self) -> Json:
        return self._data

    def build(self) -> Snapshot:
        return snapshot_from_dict(self._data, "builder")

    def yaml(self) -> str:
        return dump_scenario(self.build())

    def _action(
        self,
        action_id: str,
        queue: str,
        run: str | None,
        at: datetime | None,
        containers: list[Json] | None,
        environment: str | None,
        single: Json,
    ) -> Json:
        if at is None:
            at = self._next_submission
            self._next_submission += timedelta(minutes=1)
        action: Json = {"id": action_id, "queue": queue, "submitted_at": stamp(at)}
        if run is not None:
            action["run"] = run
        if environment is not None:
            action["environment"] = environment
        else:
            action["containers"] = containers if containers is not None else [ctr(**single)]
        return action


def _placement(
    on: tuple[str, str, int] | tuple[str, list[tuple[str, int]]], containers: list[Json]
) -> Json:
    if len(on) == 3:
        cluster, pool, node = on
        spots = [(pool, node)] * len(containers)
    else:
        cluster, spots = on
    return {
        "cluster": cluster,
        "containers": [
            {"name": c["name"], "node_pool": pool, "node": node}
            for c, (pool, node) in zip(containers, spots, strict=True)
        ],
    }
