"""Node room and queue charges of a snapshot, tracked in plain Python for the benchmark.

The first-fit baseline, the generators (which place running work on real nodes)
and the plan checker all need the same two ledgers: the free room of every node
of every pool, and what each queue holds against its caps and concurrency
limits. The rules mirror the engine's reading of the spec: a container fits a
pool when its accelerator, labels and size admit it on an empty node; CPU-only
containers stay off accelerator nodes; untyped requests take whole NVIDIA GPUs
and count against a device cap when they land on a capped device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from models.devices import NVIDIA_GPU
from models.quantity import CPU, MEMORY
from models.snapshot import Cluster, Container, NodePool, Placement, Queue


@dataclass(frozen=True)
class Need:
    """One container's request in solver units."""

    name: str
    cpu: int
    memory: int
    gpus: int
    device: str | None  # typed request (after the org default type); None if untyped or no GPU
    extras: tuple[tuple[str, int], ...]  # other named resources
    selector: tuple[tuple[str, str], ...]

    @property
    def untyped(self) -> bool:
        return self.gpus > 0 and self.device is None


def need_of(container: Container, default_type: str | None) -> Need:
    resources = container.resources
    gpus, device = 0, None
    if container.gpu is not None:
        gpus = container.gpu.count
        device = container.gpu.device.canonical if container.gpu.device else default_type
    return Need(
        name=container.name,
        cpu=resources.get(CPU, 0),
        memory=resources.get(MEMORY, 0),
        gpus=gpus,
        device=device,
        extras=tuple((k, v) for k, v in resources.items() if k not in (CPU, MEMORY) and v),
        selector=tuple(container.node_selector.items()),
    )


@dataclass
class Demand:
    """What admitting a unit charges against its queue's caps (before untyped GPUs land)."""

    resources: dict[str, int] = field(default_factory=dict)
    devices: dict[str, int] = field(default_factory=dict)
    untyped: int = 0


def demand_of(containers: Iterable[Container], needs: Iterable[Need]) -> Demand:
    demand = Demand()
    for container, need in zip(containers, needs, strict=True):
        for name, amount in container.resources.items():
            demand.resources[name] = demand.resources.get(name, 0) + amount
        if need.gpus and need.device is not None:
            demand.devices[need.device] = demand.devices.get(need.device, 0) + need.gpus
        else:
            demand.untyped += need.gpus
    return demand


class PoolRoom:
    """The free room of every node of one pool, existing nodes first, then nodes it may add."""

    def __init__(self, cluster: str, pool: NodePool) -> None:
        self.cluster = cluster
        self.name = pool.name
        shape = pool.node
        self.device = shape.accelerator if shape.accelerators else None
        # Whole NVIDIA GPUs (not a partition such as nvidia_gpu/nvidia-a100/1g.5gb).
        self.whole_nvidia = (
            self.device is not None
            and self.device.startswith(NVIDIA_GPU + "/")
            and self.device.count("/") == 1
        )
        self.gpus_per_node = shape.accelerators
        self.labels = dict(pool.labels)
        self.cpu = shape.cpu
        self.memory = shape.memory
        self.extras = {k: v for k, v in shape.resources.items() if k not in (CPU, MEMORY)}
        self.up = pool.nodes  # nodes running before the tick
        self.size = max(pool.full_scale, pool.nodes)
        self.free_cpu = [shape.cpu] * self.size
        self.free_memory = [shape.memory] * self.size
        self.free_gpus = [shape.accelerators] * self.size
        self.free_extras = {k: [v] * self.size for k, v in self.extras.items()}
        # Room only shrinks while a pass admits work, so a request that found no node
        # here rules out every later request at least as large (exact, and it keeps
        # the baseline from rescanning full pools for every waiting action).
        # Only failures seen while no container is held tentatively are remembered: a
        # held container is given back when its action does not fit as a whole.
        self._failed: list[tuple[int, int, int]] = []
        self.held = 0

    def takes_kind(self, need: Need) -> bool:
        """The pool's accelerator and labels admit the container (its size aside)."""
        if need.gpus == 0:
            if self.gpus_per_node:
                return False  # accelerator nodes are kept for accelerator work (tainted pools)
        elif need.device is not None:
            if self.device != need.device:
                return False
        elif not self.whole_nvidia:
            return False  # untyped requests take whole NVIDIA GPUs
        return all(self.labels.get(key) == value for key, value in need.selector)

    def big_enough(self, need: Need) -> bool:
        """One empty node has room for the container."""
        if need.cpu > self.cpu or need.memory > self.memory or need.gpus > self.gpus_per_node:
            return False
        return all(amount <= self.extras.get(name, amount) for name, amount in need.extras)

    def admits(self, need: Need) -> bool:
        """Accelerator, labels and size of one empty node all admit the container."""
        return self.takes_kind(need) and self.big_enough(need)

    def fits(self, node: int, need: Need) -> bool:
        if (
            self.free_cpu[node] < need.cpu
            or self.free_memory[node] < need.memory
            or self.free_gpus[node] < need.gpus
        ):
            return False
        return all(
            name not in self.free_extras or self.free_extras[name][node] >= amount
            for name, amount in need.extras
        )

    def first_node(self, need: Need) -> int | None:
        cpu, memory, gpus = need.cpu, need.memory, need.gpus
        if need.extras:
            return next((n for n in range(self.size) if self.fits(n, need)), None)
        for failed_cpu, failed_memory, failed_gpus in self._failed:
            if cpu >= failed_cpu and memory >= failed_memory and gpus >= failed_gpus:
                return None
        free_cpu, free_memory, free_gpus = self.free_cpu, self.free_memory, self.free_gpus
        for node in range(self.size):
            if free_gpus[node] >= gpus and free_cpu[node] >= cpu and free_memory[node] >= memory:
                return node
        if not self.held:
            self._failed.append((cpu, memory, gpus))
        return None

    def nodes_with_room(self, need: Need, limit: int) -> list[int]:
        """Nodes below `limit` (existing ones, say) that have room for `need`."""
        return [node for node in range(min(limit, self.size)) if self.fits(node, need)]

    def take(self, node: int, need: Need, sign: int = 1) -> None:
        """Charge `need` on `node` (sign -1 gives it back)."""
        self.free_cpu[node] -= sign * need.cpu
        self.free_memory[node] -= sign * need.memory
        self.free_gpus[node] -= sign * need.gpus
        for name, amount in need.extras:
            if name in self.free_extras:
                self.free_extras[name][node] -= sign * amount

    def overfull(self, node: int) -> bool:
        return min(self.free_cpu[node], self.free_memory[node], self.free_gpus[node]) < 0 or any(
            free[node] < 0 for free in self.free_extras.values()
        )

    def capacity(self) -> tuple[int, int]:
        """Full-scale GPUs and millicores of the pool."""
        return self.gpus_per_node * self.size, self.cpu * self.size


Spot = tuple[PoolRoom, int]
DeviceCheck = Callable[[PoolRoom, Need, dict[str, int]], bool]


class Fleet:
    """Every pool of every cluster, in snapshot order."""

    def __init__(self, clusters: Sequence[Cluster]) -> None:
        self.clusters = [c.name for c in clusters]
        self.pools_of: dict[str, list[PoolRoom]] = {
            c.name: [PoolRoom(c.name, p) for p in c.node_pools] for c in clusters
        }
        self._by_name = {(p.cluster, p.name): p for pools in self.pools_of.values() for p in pools}
        self._of_kind: dict[
            tuple[str, bool, str | None, tuple[tuple[str, str], ...]], list[PoolRoom]
        ] = {}

    def pool(self, cluster: str, name: str) -> PoolRoom:
        return self._by_name[(cluster, name)]

    def all_pools(self) -> list[PoolRoom]:
        return [p for c in self.clusters for p in self.pools_of[c]]

    def compatible(self, cluster: str, need: Need) -> list[PoolRoom]:
        """The cluster's pools whose empty node admits `need`, in order."""
        key = (cluster, need.gpus > 0, need.device, need.selector)
        pools = self._of_kind.get(key)
        if pools is None:
            pools = [p for p in self.pools_of[cluster] if p.takes_kind(need)]
            self._of_kind[key] = pools
        return [p for p in pools if p.big_enough(need)]

    def can_ever_run(
        self,
        needs: Sequence[Need],
        clusters: Sequence[str],
        allows: Callable[[PoolRoom, Need], bool],
    ) -> bool:
        """Some routed cluster could run the unit on empty nodes at full scale.

        Every container needs a pool whose empty node admits it and that the queue
        `allows` (a device cap below the request rules a pool out), and the unit's
        total request must not exceed those pools' full-scale room.
        """
        for cluster in clusters:
            usable = [[p for p in self.compatible(cluster, n) if allows(p, n)] for n in needs]
            if not all(usable):
                continue
            pools = {id(p): p for group in usable for p in group}.values()
            totals = (
                sum(p.cpu * p.size for p in pools),
                sum(p.memory * p.size for p in pools),
                sum(p.gpus_per_node * p.size for p in pools),
            )
            wanted = (
                sum(n.cpu for n in needs),
                sum(n.memory for n in needs),
                sum(n.gpus for n in needs),
            )
            if all(w <= t for w, t in zip(wanted, totals, strict=True)):
                return True
        return False

    def place(
        self,
        needs: Sequence[Need],
        clusters: Sequence[str],
        device_ok: DeviceCheck,
        choose: Callable[[PoolRoom, Need], int | None],
        pool_order: Callable[[list[PoolRoom]], Sequence[PoolRoom]] = list,
    ) -> tuple[str, list[Spot]] | None:
        """Put all containers in one cluster (tried in the given order) and take their room.

        Returns None, with nothing taken, when no cluster holds them all.

        `choose` picks a node of a pool for a container and `pool_order` orders a cluster's
        pools (first fit keeps both in order; the generators spread running work at
        random); `device_ok` applies the queue's device caps to untyped GPUs.
        """
        for cluster in clusters:
            spots: list[Spot] = []
            landed: dict[str, int] = {}
            for need in needs:
                spot = None
                for pool in pool_order(self.compatible(cluster, need)):
                    if need.untyped and not device_ok(pool, need, landed):
                        continue
                    node = choose(pool, need)
                    if node is not None:
                        spot = (pool, node)
                        break
                if spot is None:
                    break
                spot[0].take(spot[1], need)
                spot[0].held += 1
                spots.append(spot)
                if need.untyped and spot[0].device is not None:
                    landed[spot[0].device] = landed.get(spot[0].device, 0) + need.gpus
            whole = len(spots) == len(needs)
            for (pool, node), need in zip(spots, needs, strict=False):
                pool.held -= 1
                if not whole:
                    pool.take(node, need, sign=-1)
            if whole:
                return cluster, spots
        return None

    def occupy(self, placement: Placement, needs: Sequence[Need]) -> list[Spot]:
        """Charge a placement that is already decided (running work, or a plan to check)."""
        by_name = {need.name: need for need in needs}
        spots = []
        for spot in placement.containers:
            pool = self.pool(placement.cluster, spot.node_pool)
            pool.take(spot.node, by_name[spot.name])
            pool.up = max(pool.up, spot.node + 1)  # a running container keeps its node up
            spots.append((pool, spot.node))
        return spots


@dataclass
class QueueLedger:
    """What a queue holds against its caps, its action slots and its run slots."""

    queue: Queue
    used: dict[str, int] = field(default_factory=dict)
    device_used: dict[str, int] = field(default_factory=dict)
    untyped_used: int = 0
    in_flight: int = 0
    runs: set[str] = field(default_factory=set)

    def exceeds_alone(self, demand: Demand) -> str | None:
        """The cap the demand is over even on an empty queue: waiting cannot help."""
        q = self.queue
        for name, amount in demand.resources.items():
            if name in q.max_resources and amount > q.max_resources[name]:
                return name
        for device, count in demand.devices.items():
            if device in q.max_accelerators and count > q.max_accelerators[device]:
                return device
        if q.max_gpus is not None and demand.untyped > q.max_gpus:
            return "gpu"
        return None

    def slot_refusal(self, run: str) -> str | None:
        q = self.queue
        runs_full = q.run_concurrency is not None and len(self.runs) >= q.run_concurrency
        if runs_full and run not in self.runs:
            return "run_concurrency"
        if q.action_concurrency is not None and self.in_flight >= q.action_concurrency:
            return "action_concurrency"
        return None

    def cap_refusal(self, demand: Demand) -> str | None:
        q = self.queue
        for name, amount in demand.resources.items():
            cap = q.max_resources.get(name)
            if cap is not None and amount and self.used.get(name, 0) + amount > cap:
                return name
        for device, count in demand.devices.items():
            cap = q.max_accelerators.get(device)
            if cap is not None and self.device_used.get(device, 0) + count > cap:
                return device
        over = q.max_gpus is not None and self.untyped_used + demand.untyped > q.max_gpus
        return "gpu" if over and demand.untyped else None

    def device_allows(self, pool: PoolRoom, need: Need) -> bool:
        """An untyped request never fits a device whose cap is below it, even when idle."""
        if not need.untyped or pool.device is None:
            return True
        cap = self.queue.max_accelerators.get(pool.device)
        return cap is None or need.gpus <= cap

    def device_ok(self, pool: PoolRoom, need: Need, landed: dict[str, int]) -> bool:
        """An untyped request may land on a capped device only while that cap has room."""
        if not need.untyped or pool.device is None:
            return True
        cap = self.queue.max_accelerators.get(pool.device)
        if cap is None:
            return True
        held = self.device_used.get(pool.device, 0) + landed.get(pool.device, 0)
        return held + need.gpus <= cap

    def charge(self, demand: Demand, spots: Sequence[Spot], needs: Sequence[Need]) -> None:
        """Charge a unit's demand and where its untyped GPUs landed (no slot counted)."""
        for name, amount in demand.resources.items():
            self.used[name] = self.used.get(name, 0) + amount
        for device, count in demand.devices.items():
            self.device_used[device] = self.device_used.get(device, 0) + count
        self.untyped_used += demand.untyped
        for (pool, _), need in zip(spots, needs, strict=True):
            if need.untyped and pool.device is not None:
                self.device_used[pool.device] = self.device_used.get(pool.device, 0) + need.gpus

    def start(self, run: str) -> None:
        self.in_flight += 1
        self.runs.add(run)
