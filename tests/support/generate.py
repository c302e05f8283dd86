"""Random small snapshots for the oracle comparison and the property tests.

One generator driven by a `random.Random`, so a seed reproduces an instance and
hypothesis (through `st.randoms()`) can shrink one. Sizes stay inside what the
brute-force oracle searches quickly. Deliberately left out, because the spec
leaves them open and an exact comparison would only test a reading: depth that
binds, submission times exactly at a max_queued_time or deadline boundary,
partitions, resources a node does not declare, and runs shared between queues.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from models.snapshot import Snapshot
from tests.support.builders import NOW, SnapshotBuilder, ctr, stamp

GIB = 2**30

# (accelerator, devices per node) a pool may have; None is a CPU-only pool.
POOL_KINDS: list[tuple[str | None, int]] = [
    (None, 0),
    ("T4", 2),
    ("L4", 2),
    ("H100", 4),
    ("V6E", 4),
]
PACKING_KINDS: list[tuple[str | None, int]] = [("H100", 8), ("A100", 8), ("H100", 4)]
NVIDIA = ["T4", "L4", "H100", "A100"]


@dataclass(frozen=True)
class Size:
    queued: int = 6  # most queued actions
    nodes: int = 4  # most nodes in all pools at full scale
    clusters: int = 2
    queues: int = 3
    running: int = 3
    packing: bool = False  # GPU pools of 4-8 devices only, so every container asks for GPUs


SMALL = Size()
DOZEN = Size(queued=12, nodes=6, running=4)
"""Up to a dozen actions: enough for a change to let earlier actions in first (issue 18)."""
PACKING = Size(clusters=1, running=4, packing=True)
"""Multi-GPU containers on partly used GPU nodes: where first-fit placement goes wrong and the
exact check has to repack earlier admissions."""


@dataclass
class _Pool:
    cluster: str
    name: str
    cpu: int
    memory_gib: int
    device: str | None
    slots: int
    labels: dict[str, str]
    nodes: int
    full_scale: int


def random_snapshot(rng: random.Random, size: Size = SMALL) -> Snapshot:
    return _Generator(rng, size).build()


class _Generator:
    def __init__(self, rng: random.Random, size: Size) -> None:
        self.rng = rng
        self.size = size
        self.builder = SnapshotBuilder()
        self.pools: list[_Pool] = []
        self.queue_names: list[str] = []
        self.routes: dict[str, list[str] | None] = {}
        self.free: dict[tuple[str, str, int], list[int]] = {}  # cpu, memory GiB, slots
        self.runs: dict[str, list[str]] = {}
        self.envs: dict[str, tuple[str, bool]] = {}  # name -> (queue, running)
        self.counter = 0
        self.default_type: str | None = None

    def build(self) -> Snapshot:
        rng = self.rng
        if rng.random() < 0.15:
            self.default_type = rng.choice(["T4", "H100"])
            self.builder.default_gpu_type(self.default_type)
        self._clusters()
        self._queues()
        self._environment()
        for _ in range(rng.randint(0, self.size.running)):
            self._running()
        for _ in range(rng.randint(1, self.size.queued)):
            self._queued()
        return self.builder.build()

    # -- world -------------------------------------------------------------------

    def _clusters(self) -> None:
        rng = self.rng
        budget = self.size.nodes
        for c in range(rng.randint(1, self.size.clusters)):
            if budget == 0:
                break
            cluster = f"c{c}"
            self.builder.cluster(cluster)
            for p in range(rng.randint(1, 2)):
                if budget == 0:
                    break
                if self.size.packing:
                    device, slots = rng.choice(PACKING_KINDS)
                elif p == 0 and rng.random() < 0.5:
                    device, slots = POOL_KINDS[0]
                else:
                    device, slots = rng.choice(POOL_KINDS)
                full = rng.randint(1, min(2, budget))
                budget -= full
                nodes = rng.randint(0, full)
                labels = {"tier": rng.choice("ab")} if rng.random() < 0.4 else {}
                pool = _Pool(
                    cluster, f"p{p}", rng.choice([4, 8]), rng.choice([16, 32]),
                    device, slots, labels, nodes, full,
                )  # fmt: skip
                self.pools.append(pool)
                self.builder.pool(
                    pool.name,
                    cpu=str(pool.cpu),
                    memory=f"{pool.memory_gib}Gi",
                    accelerator=device,
                    accelerators=slots,
                    labels=labels,
                    nodes=nodes,
                    max_nodes=full,
                )
                for index in range(full):
                    self.free[(cluster, pool.name, index)] = [
                        pool.cpu * 1000,
                        pool.memory_gib,
                        slots,
                    ]
        self.cluster_names = sorted({p.cluster for p in self.pools})

    def _queues(self) -> None:
        rng = self.rng
        often = 0.1 if self.size.packing else 0.4  # packing instances are about room, not caps
        for q in range(rng.randint(1, self.size.queues)):
            name = f"q{q}"
            settings: dict[str, Any] = {
                "priority": rng.choice([0, 0, 1]),
                "scheduling": rng.choice(["strict_fifo", "greedy_capacity"]),
            }
            if rng.random() < often:
                settings["max_resources"] = {"cpu": str(rng.choice([4, 8, 12, 16]))}
            if rng.random() < often / 2:
                settings.setdefault("max_resources", {})["memory"] = f"{rng.choice([16, 32, 64])}Gi"
            if rng.random() < often:
                settings["max_gpus"] = rng.choice([0, 1, 2, 3, 4, 6, 8])
            if rng.random() < often:
                kinds = rng.sample([*NVIDIA, "V6E"], rng.randint(1, 2))
                settings["max_accelerators"] = {k: rng.choice([0, 1, 2, 3, 4, 6, 8]) for k in kinds}
            if rng.random() < 0.3:
                settings["action_concurrency"] = rng.randint(1, 4)
            if rng.random() < 0.3:
                settings["run_concurrency"] = rng.randint(1, 3)
            routes = None
            if len(self.cluster_names) > 1 and rng.random() < 0.3:
                routes = [rng.choice(self.cluster_names)]
                settings["clusters"] = routes
            self.builder.queue(name, **settings)
            self.queue_names.append(name)
            self.routes[name] = routes
            self.runs[name] = []

    def _environment(self) -> None:
        rng = self.rng
        if rng.random() >= 0.3:
            return
        queue = rng.choice(self.queue_names)
        replicas = rng.randint(1, 2)
        request = self._request(queue)
        spots = self._spots(queue, [request] * replicas) if rng.random() < 0.5 else None
        name = "env0"
        if spots is None:
            self.builder.environment(name, queue=queue, replicas=replicas, **request)
        else:
            self.builder.environment(name, queue=queue, replicas=replicas, on=spots, **request)
        self.envs[name] = (queue, spots is not None)

    # -- actions -----------------------------------------------------------------

    def _submitted(self) -> Any:
        return NOW - timedelta(minutes=self.rng.randint(1, 6))

    def _run(self, queue: str) -> str:
        runs = self.runs[queue]
        if runs and self.rng.random() < 0.35:
            return self.rng.choice(runs)
        run = f"{queue}-r{len(runs)}"
        runs.append(run)
        return run

    def _running(self) -> None:
        rng = self.rng
        queue = rng.choice(self.queue_names)
        self.counter += 1
        action_id = f"run{self.counter}"
        env = [name for name, (q, up) in self.envs.items() if q == queue and up]
        if env and rng.random() < 0.5:
            self.builder.running(action_id, queue=queue, run=self._run(queue), environment=env[0])
            return
        requests = [self._request(queue) for _ in range(rng.randint(1, 2))]
        spots = self._spots(queue, requests)
        if spots is None:
            return
        containers = [ctr(f"c{i}", **r) for i, r in enumerate(requests)]
        self.builder.running(
            action_id,
            queue=queue,
            run=self._run(queue),
            at=self._submitted(),
            containers=containers,
            on=spots,
        )

    def _queued(self) -> None:
        rng = self.rng
        queue = rng.choice(self.queue_names)
        self.counter += 1
        action_id = f"a{self.counter}"
        at = self._submitted()
        extra: dict[str, Any] = {}
        if rng.random() < 0.1:
            waited = NOW - at
            extra["max_queued_time"] = f"{int(waited.total_seconds()) + rng.choice([-30, 30])}s"
        elif rng.random() < 0.1:
            extra["deadline"] = stamp(NOW + timedelta(seconds=rng.choice([-90, 90])))
        env = [name for name, (q, _) in self.envs.items() if q == queue]
        if env and rng.random() < 0.4:
            self.builder.queued(
                action_id, queue=queue, run=self._run(queue), at=at, environment=env[0], **extra
            )
            return
        containers = [ctr(f"c{i}", **self._request(queue)) for i in range(rng.randint(1, 2))]
        self.builder.queued(
            action_id, queue=queue, run=self._run(queue), at=at, containers=containers, **extra
        )

    def _request(self, queue: str) -> dict[str, Any]:
        """Mostly a request sized for one node of a pool the queue routes to (so most work is
        feasible and contends for room), sometimes for any pool, sometimes a little too big."""
        rng = self.rng
        routes = self.routes[queue] or self.cluster_names
        routed = [p for p in self.pools if p.cluster in routes]
        pool = rng.choice(routed if routed and rng.random() < 0.9 else self.pools)
        oversize = rng.random() < 0.04
        cpu = rng.choice([1, 2, 3, 4, 6]) * pool.cpu * 1000 // 8 + (
            pool.cpu * 1000 if oversize else 0
        )
        request: dict[str, Any] = {
            "cpu": f"{cpu}m" if cpu % 1000 else str(cpu // 1000),
            "memory": f"{rng.choice([1, 2, 4]) * pool.memory_gib // 8}Gi"
            if rng.random() < 0.8
            else None,
        }
        if pool.device is not None:
            count = rng.randint(1, pool.slots) + (1 if rng.random() < 0.04 else 0)
            if self.size.packing:  # mostly part of a node, so several share one
                count = min(count, rng.randint(1, pool.slots))
            untyped_ok = pool.device in NVIDIA and self.default_type in (None, pool.device)
            untyped = untyped_ok and rng.random() < 0.4
            request["gpu"] = count if untyped else f"{pool.device}:{count}"
        if pool.labels and rng.random() < 0.3:
            request["selector"] = dict(pool.labels)
        elif rng.random() < 0.03:
            request["selector"] = {"tier": rng.choice("ab")}
        return request

    def _spots(
        self, queue: str, requests: list[dict[str, Any]]
    ) -> tuple[str, list[tuple[str, int]]] | None:
        """Nodes with room for each request, all in one cluster the queue routes to; the room
        is taken. None when the random choice does not fit (the work is then left out)."""
        rng = self.rng
        routes = self.routes[queue] or self.cluster_names
        cluster = rng.choice(routes)
        spots: list[tuple[str, int]] = []
        taken: list[tuple[tuple[str, str, int], list[int]]] = []
        for request in requests:
            need = _need(request)
            candidates = [
                (p, i)
                for p in self.pools
                if p.cluster == cluster and _matches(p, request, self.default_type)
                for i in range(p.nodes)
                if all(a <= f for a, f in zip(need, self.free[(p.cluster, p.name, i)], strict=True))
            ]
            if not candidates:
                for key, need_taken in taken:
                    self.free[key] = [
                        f + a for f, a in zip(self.free[key], need_taken, strict=True)
                    ]
                return None
            pool, index = rng.choice(candidates)
            key = (cluster, pool.name, index)
            self.free[key] = [f - a for f, a in zip(self.free[key], need, strict=True)]
            taken.append((key, need))
            spots.append((pool.name, index))
        return cluster, spots


def _need(request: dict[str, Any]) -> list[int]:
    cpu = request["cpu"]
    milli = int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000
    memory = int(request["memory"][:-2]) if request.get("memory") else 0
    gpu = request.get("gpu")
    count = 0 if gpu is None else gpu if isinstance(gpu, int) else int(gpu.split(":")[1])
    return [milli, memory, count]


def _matches(pool: _Pool, request: dict[str, Any], default_type: str | None) -> bool:
    selector = request.get("selector") or {}
    if any(pool.labels.get(k) != v for k, v in selector.items()):
        return False
    gpu = request.get("gpu")
    if gpu is None:
        return pool.device is None  # CPU work stays off accelerator pools
    if isinstance(gpu, int):
        return pool.device == default_type if default_type else pool.device in NVIDIA
    return pool.device == gpu.split(":")[0]
