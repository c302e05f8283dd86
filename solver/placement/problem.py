"""A snapshot compiled once into plain arrays: the solver's input.

Everything the tick needs is indexed by small integers here (queues, clusters,
node pools, pending actions in global order, containers to place), so the
phases after it never look at a pydantic model or parse a spelling again.

A value the engine cannot hold (a request or a node's room beyond int64 headroom, a pool of
more nodes than its ledger holds: input that skipped validation, built with model_construct or
read from an old row) never stops the tick. The pending action (or the environment its
actions start) is compiled as unrepresentable and fails INFEASIBLE naming the field; such a
node pool is left out of the fleet; both are logged at error level and counted in the
result's `solver`. A cap or queue limit beyond the engine's range caps nothing it could
hold, so it is held at UNBOUNDED.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

import numpy as np

from models.devices import NVIDIA_GPU
from models.quantity import CPU, MEMORY
from models.resources import EMPTY, UNTYPED_GPU, ResourceKind, ResourceVector, kind_of
from models.snapshot import (
    Action,
    ActionState,
    Container,
    NodePool,
    Placement,
    Scheduling,
    Snapshot,
)
from solver.placement.room import Fleet, Rows

CPU_DIM, MEMORY_DIM, GPU_DIM = 0, 1, 2
UNBOUNDED = np.iinfo(np.int64).max // 4  # room of a resource a node does not declare
# A pool keeps one row of room per node at full scale; an environment one container per
# replica. Far above any real fleet, far below what would exhaust memory.
MAX_POOL_NODES = 2**20
MAX_REPLICAS = 2**16
# (Kind, request) pairs matched to node pools at once (a pairs × pools test each).
MATCH_BLOCK = 1024
# The (queue, list of containers) shapes a CompileCache holds before it starts afresh: a
# long-lived service meets new shapes at every tick. L's line has 23,074, which with their
# items, matches and the snapshot's lists took 30 MB (1.3 KB each): about 65 MB at most.
KEPT_SHAPES_MOST = 50_000

log = logging.getLogger("sluice.engine")


class Unrepresentable(ValueError):
    """A value of the snapshot beyond what the engine's int64 arithmetic holds."""

    def __init__(self, where: str, value: int, limit: int) -> None:
        super().__init__(f"{where} is {value}, more than the engine can hold (at most {limit})")


@dataclass
class QueueInfo:
    index: int
    name: str
    pool: str
    scheduling: Scheduling
    head_blocked_since: datetime | None  # carried from the previous tick
    priority: int
    caps: ResourceVector  # every cap by canonical name (models.snapshot.Queue.caps)
    action_concurrency: int | None
    run_concurrency: int | None
    depth: int | None
    clusters: list[int]
    # What running work already holds; an untyped GPU counts under `gpu` and under the device
    # it landed on, whose cap it shares.
    held: ResourceVector = EMPTY
    running: int = 0
    active_runs: set[str] = field(default_factory=set)

    @property
    def strict(self) -> bool:
        return self.scheduling is Scheduling.STRICT_FIFO


@dataclass
class PoolInfo:
    index: int
    cluster: int
    name: str
    device: str | None
    gpus_per_node: int
    labels: dict[str, str]
    room: np.ndarray  # one node's allocatable room per placement dimension
    nodes: int  # nodes up now
    max_nodes: int  # full scale
    used: np.ndarray  # (max_nodes, dims) held by running work

    @property
    def nvidia(self) -> bool:
        return self.device is not None and self.device.startswith(NVIDIA_GPU + "/")

    @cached_property
    def declared(self) -> np.ndarray:
        """The dimensions a node declares (bounded room), as a 0/1 mask of the room's type."""
        return (self.room < UNBOUNDED).astype(self.room.dtype)


_NO_POOL_INDICES = np.zeros(0, dtype=np.int64)
_NO_POOL_INDICES.flags.writeable = False  # shared by every item not matched yet
_NO_REQUEST = np.zeros(0, dtype=np.int64)


@dataclass(slots=True)
class Item:
    """One container to place: of a pending action, or a replica of a starting pool."""

    name: str
    request: np.ndarray  # placement dimensions
    gpus: int
    device: str | None  # typed request (after the org default type), None if untyped or none
    selector: dict[str, str]
    # Both set when its shape is matched (_ItemMaker.match).
    pools: dict[int, list[int]] = field(default_factory=dict)  # cluster -> compatible pools
    all_pools: np.ndarray = field(default_factory=lambda: _NO_POOL_INDICES)

    @property
    def untyped(self) -> bool:
        return self.gpus > 0 and self.device is None


@dataclass(slots=True)
class EnvInfo:
    index: int
    name: str
    queue: int
    running: bool
    items: list[Item]
    demand: ResourceVector  # what starting the pool charges against its queue's caps
    unrepresentable: str | None = None  # why it cannot be compiled (its actions fail)


@dataclass(slots=True)
class ActionInfo:
    index: int  # position in global order
    id: str
    run: str
    queue: int
    submitted_at: datetime
    max_queued_time_s: float | None
    deadline: datetime | None
    items: list[Item]
    demand: ResourceVector  # what admitting it charges against its queue's caps
    env: int | None  # index into Problem.envs
    unrepresentable: str | None = None  # why it cannot be compiled (it fails INFEASIBLE)


@dataclass
class Problem:
    now: datetime
    dims: list[str]  # placement dimension names: cpu, memory, gpu, then declared extras
    queues: list[QueueInfo]
    cluster_names: list[str]
    pools: list[PoolInfo]
    pools_of_cluster: list[list[int]]
    envs: list[EnvInfo]
    actions: list[ActionInfo]  # pending, in global order
    cluster_room: np.ndarray  # (clusters, dims): full-scale room on the dimensions nodes declare
    pool_cluster: np.ndarray  # the cluster of each pool
    skipped_pools: int = 0  # node pools left out: a value beyond the engine's range
    _full_scale: dict[tuple[int, ...], np.ndarray] = field(default_factory=dict)
    _positions: dict[str, int] = field(default_factory=dict)
    _declared: list[np.ndarray] = field(default_factory=list)
    _fleet: list[Fleet] = field(default_factory=list)
    # The compiled rows of its lists of containers and demands (solver.placement.room): they
    # depend only on the objects they are built from, so a changed copy keeps them.
    _rows: list[Rows] = field(default_factory=list)

    def changed(self, **fields: Any) -> Problem:
        """A copy with `fields` replaced and its caches empty: what they hold depends on the
        pools and requests, which a change may touch (every copy goes through here, so a new
        cache is reset in one place)."""
        return replace(
            self,
            **fields,
            _full_scale={},
            _positions={},
            _declared=[],
            _fleet=[],
        )

    def fleet(self) -> Fleet:
        """The pools, clusters and queues as the compiled ledger reads them (one per problem)."""
        if not self._fleet:
            clusters = len(self.cluster_names)
            if not self._rows or not self._rows[0].fits(len(self.dims), clusters):
                self._rows[:] = [Rows(len(self.dims), clusters)]
            self._fleet.append(Fleet(self, self._rows[0], _is_device, _is_whole_nvidia))
        return self._fleet[0]

    def pool_declared(self) -> np.ndarray:
        """Every pool's `declared` mask, one row a pool."""
        if not self._declared:
            rows = [pool.declared for pool in self.pools]
            self._declared.append(
                np.stack(rows) if rows else np.zeros((0, len(self.dims)), dtype=np.int64)
            )
        return self._declared[0]

    def positions(self) -> dict[str, int]:
        """Each pending action's index by its id: made once per problem, for the proofs
        that patch a tick's problem again and again (solver.explain.patch)."""
        if not self._positions and self.actions:
            self._positions = {a.id: a.index for a in self.actions}
        return self._positions

    def unrepresentable(self, action: ActionInfo) -> str | None:
        """Why the action, or the environment it would start, cannot be compiled."""
        if action.unrepresentable is not None or action.env is None:
            return action.unrepresentable
        env = self.envs[action.env]
        return None if env.running else env.unrepresentable

    def full_scale_room(self, pools: tuple[int, ...]) -> np.ndarray:
        """The room of these pools with every node up (unbounded where a node declares none)."""
        room = self._full_scale.get(pools)
        if room is None:
            room = np.zeros(len(self.dims), dtype=np.int64)
            for p in pools:
                pool = self.pools[p]
                bounded = pool.room < UNBOUNDED
                scaled = np.where(
                    bounded, np.where(bounded, pool.room, 0) * pool.max_nodes, UNBOUNDED
                )
                room = np.minimum(room + scaled, UNBOUNDED)
            self._full_scale[pools] = room
        return room

    def fits_base_room(self, item: Item, cluster: int) -> bool:
        """Whether some node the item may use has room for it next to running work alone."""
        return self.fleet().fits_base_room(item.request, item.pools.get(cluster, ()))


def compile_snapshot(snapshot: Snapshot, kept: CompileCache | None = None) -> Problem:
    """Index the snapshot; pending actions are put in global order (priority, then arrival).
    With `kept`, what an earlier snapshot of the same fleet compiled is reused."""
    extras = sorted(
        {r for c in snapshot.clusters for p in c.node_pools for r in p.node.resources}
        - {CPU, MEMORY}
    )
    dims = [CPU, MEMORY, "gpu", *extras]
    pools, pools_of_cluster = _compile_pools(snapshot, dims)
    queues = compile_queues(snapshot)
    kept = kept or CompileCache()
    items = kept.item_maker(snapshot, dims, pools, queues)
    queue_of = {q.name: q for q in queues}
    pool_of = {(pool.cluster, pool.name): pool for pool in pools}
    cluster_of = {c.name: i for i, c in enumerate(snapshot.clusters)}

    envs: list[EnvInfo] = []
    for e, spec in enumerate(snapshot.environments):
        queue = queue_of[spec.queue]
        try:
            if spec.replicas > MAX_REPLICAS:
                raise Unrepresentable("replicas", spec.replicas, MAX_REPLICAS)
            containers = spec.replica_containers()
            env_items, demand = items.of(containers, queue, "resources")
        except (ArithmeticError, ValueError) as error:
            why = _rejected(f"environment {spec.name}", error, "actions that start it fail")
            envs.append(EnvInfo(e, spec.name, queue.index, spec.running, [], EMPTY, why))
            continue
        envs.append(EnvInfo(e, spec.name, queue.index, spec.running, env_items, demand))
        if spec.running and spec.placement is not None:
            cluster = cluster_of[spec.placement.cluster]
            charges = _container_charges(env_items, spec.placement, cluster, pool_of)
            _charge_running(queue, demand, charges, pools)
    env_of = {env.name: env.index for env in envs}

    pending = []
    for position, action in enumerate(snapshot.actions):
        queue = queue_of[action.queue]
        if action.state is ActionState.QUEUED:
            pending.append((-queue.priority, action.submitted_at, position, action))
            continue
        queue.running += 1
        queue.active_runs.add(action.run_id)
        # An action that joined a running pool holds a slot but no room: the pool holds that.
        if action.environment is None and action.placement is not None:
            try:
                demand, charges = kept.running(action, queue, items, cluster_of, pool_of)
            except (ArithmeticError, ValueError) as error:
                # It runs whatever the engine thinks of it; what it holds cannot be counted.
                _rejected(f"running action {action.id}", error, "what it holds is not counted")
                continue
            _charge_running(queue, demand, charges, pools)
    kept.forget_ended()
    pending.sort(key=lambda entry: entry[:3])

    actions = []
    for order, (_, _, _, action) in enumerate(pending):
        queue = queue_of[action.queue]
        try:
            action_items, demand = items.of(action.containers, queue)
            compiled = ActionInfo(
                index=order,
                id=action.id,
                run=action.run_id,
                queue=queue.index,
                submitted_at=action.submitted_at,
                max_queued_time_s=(
                    action.max_queued_time.total_seconds() if action.max_queued_time else None
                ),
                deadline=action.deadline_at(),
                items=action_items,
                demand=demand,
                env=env_of[action.environment] if action.environment is not None else None,
            )
        except (ArithmeticError, ValueError) as error:
            compiled = ActionInfo(
                index=order,
                id=action.id,
                run=action.run_id,
                queue=queue.index,
                submitted_at=action.submitted_at,
                max_queued_time_s=None,
                deadline=None,
                items=[],
                demand=EMPTY,
                env=None,
                unrepresentable=_rejected(f"action {action.id}", error, "it fails INFEASIBLE"),
            )
        actions.append(compiled)
    items.match()
    items.end_snapshot()
    skipped = sum(len(c.node_pools) for c in snapshot.clusters) - len(pools)
    return Problem(
        now=snapshot.now,
        dims=dims,
        queues=queues,
        cluster_names=[c.name for c in snapshot.clusters],
        pools=pools,
        pools_of_cluster=pools_of_cluster,
        envs=envs,
        actions=actions,
        cluster_room=clusters_room(pools, pools_of_cluster, len(dims)),
        pool_cluster=np.array([pool.cluster for pool in pools], dtype=np.int64),
        skipped_pools=skipped,
        _rows=kept.rows,
    )


def clusters_room(
    pools: list[PoolInfo], pools_of_cluster: list[list[int]], dims: int
) -> np.ndarray:
    """Per cluster, its pools' room at full scale on the dimensions their nodes declare."""
    room = np.zeros((len(pools_of_cluster), dims))
    for c, indices in enumerate(pools_of_cluster):
        for p in indices:
            pool = pools[p]
            room[c] += pool.room * pool.declared * pool.max_nodes
    return room


def match_pools_again(problem: Problem, queues: set[int], upto: int | None = None) -> Problem:
    """`problem` with the containers of these queues' pending actions and environments
    matched again to its node pools: after pools were added to it (at the end, so the pools
    of every item keep their indices), as compile_snapshot would match them. With `upto`,
    only the actions ahead of that position (a line that ends there)."""
    matcher = _PoolMatcher(problem.pools, len(problem.dims))
    # What matching reads of a container (and its queue): equal keys, equal pools.
    Key = tuple[int, bytes, str | None, int, tuple[tuple[str, str], ...]]

    keys: dict[tuple[int, int], Key] = {}  # by item object: the line's actions share them

    def key(item: Item, queue: int) -> Key:
        known = keys.get((id(item), queue))
        if known is None:
            selector = tuple(sorted(item.selector.items()))
            known = (queue, item.request.tobytes(), item.device, item.gpus, selector)
            keys[(id(item), queue)] = known
        return known

    actions = list(problem.actions)
    envs = list(problem.envs)
    owners: list[ActionInfo | EnvInfo] = [
        *(a for a in actions[:upto] if a.queue in queues and a.items),
        *(e for e in envs if e.queue in queues and e.items),
    ]
    # Each shape once, all at once: the matcher tests a block of shapes in one numpy call.
    probes: dict[Key, Item] = {}
    for owner in owners:
        for item in owner.items:
            shape = key(item, owner.queue)
            if shape not in probes:
                probes[shape] = replace(item)  # the matcher sets what it finds on the item
    matcher.match([(probe, problem.queues[k[0]]) for k, probe in probes.items()])
    # Compared item by item, not by shape: equal shapes may come matched to different
    # numberings (one compiled again from a snapshot whose added pool sits among its
    # cluster's). The actions of a queue with equal containers share one list of items
    # (compile_snapshot), and share the list matched again: None where nothing changed.
    again: dict[tuple[int, int], list[Item] | None] = {}
    for owner in owners:
        known = (id(owner.items), owner.queue)
        if known not in again:
            matched = [probes[key(item, owner.queue)] for item in owner.items]
            changed = any(i.pools != p.pools for i, p in zip(owner.items, matched, strict=True))
            again[known] = (
                [
                    replace(item, pools=probe.pools, all_pools=probe.all_pools)
                    for item, probe in zip(owner.items, matched, strict=True)
                ]
                if changed
                else None
            )
        items = again[known]
        if items is None:
            continue
        if isinstance(owner, ActionInfo):
            actions[owner.index] = replace(owner, items=items)
        else:
            envs[owner.index] = replace(owner, items=items)
    return problem.changed(actions=actions, envs=envs)


def _is_device(name: str) -> bool:
    return kind_of(name) is ResourceKind.DEVICE


def _is_whole_nvidia(name: str) -> bool:
    """A whole NVIDIA GPU model (not a partition): where untyped GPUs may land."""
    return name.startswith(NVIDIA_GPU + "/") and name.count("/") == 1


def _rejected(who: str, error: Exception, outcome: str) -> str:
    """Log a part of the snapshot the engine cannot compile, and what becomes of it; the
    words its failure says."""
    why = f"{who} cannot be compiled: {error}"
    log.error("%s; %s, the rest of the line is scheduled", why, outcome)
    return why


def _compile_pools(snapshot: Snapshot, dims: list[str]) -> tuple[list[PoolInfo], list[list[int]]]:
    pools: list[PoolInfo] = []
    pools_of_cluster: list[list[int]] = []
    for c, cluster in enumerate(snapshot.clusters):
        indices = []
        for spec in cluster.node_pools:
            try:
                full = pool_scale(spec)
            except Unrepresentable as error:
                _rejected(f"node pool {cluster.name}/{spec.name}", error, "it is left out")
                continue
            room = np.full(len(dims), UNBOUNDED, dtype=np.int64)
            for name, amount in spec.node.room.items():
                room[dims.index(name)] = amount
            room[GPU_DIM] = spec.node.accelerators
            indices.append(len(pools))
            pools.append(
                PoolInfo(
                    index=len(pools),
                    cluster=c,
                    name=spec.name,
                    device=spec.node.accelerator if spec.node.accelerators else None,
                    gpus_per_node=spec.node.accelerators,
                    labels=dict(spec.labels),
                    room=room,
                    nodes=spec.nodes,
                    max_nodes=full,
                    used=np.zeros((full, len(dims)), dtype=np.int64),
                )
            )
        pools_of_cluster.append(indices)
    return pools, pools_of_cluster


def pool_scale(spec: NodePool) -> int:
    """The nodes a pool compiles to (its full scale, or more where more are up); raises
    Unrepresentable for a pool whose room at full scale the engine cannot sum."""
    full = max(spec.full_scale, spec.nodes)
    if full > MAX_POOL_NODES:
        field_name = "nodes" if spec.nodes >= spec.full_scale else "max_nodes"
        raise Unrepresentable(field_name, full, MAX_POOL_NODES)
    amounts = [*spec.node.room.items(), ("accelerators", spec.node.accelerators)]
    for name, amount in amounts:
        if amount * max(full, 1) > UNBOUNDED:
            where = name if name == "accelerators" else f"node.{name}"
            raise Unrepresentable(f"{where} × {full} nodes", amount * max(full, 1), UNBOUNDED)
    return full


def _check_containers(containers: Iterable[Container], field_name: str) -> None:
    """Raise Unrepresentable when a request, or its sum over the containers, is beyond int64
    headroom (UNBOUNDED: a node's room of a resource it does not declare)."""
    totals: dict[str, int] = {}
    for c, container in enumerate(containers):
        requests = dict(container.resources)
        if container.gpu is not None:
            requests["gpu"] = container.gpu.count
        for name, amount in requests.items():
            totals[name] = totals.get(name, 0) + amount
            if totals[name] > UNBOUNDED:
                where = (
                    f"resources.{name}"
                    if field_name == "resources"
                    else f"{field_name}.{c}.resources.{name}"
                )
                raise Unrepresentable(where, amount, UNBOUNDED)


def _held(amount: int | None) -> int | None:
    """A cap or limit beyond the engine's range caps nothing it can hold."""
    return None if amount is None else min(amount, UNBOUNDED)


def compile_queues(snapshot: Snapshot) -> list[QueueInfo]:
    """The snapshot's queues: their settings, routing and priority; nothing they hold yet."""
    cluster_of = {c.name: i for i, c in enumerate(snapshot.clusters)}
    return [
        QueueInfo(
            index=q,
            name=spec.name,
            pool=spec.pool,
            scheduling=spec.scheduling,
            head_blocked_since=spec.head_blocked_since,
            priority=spec.priority,
            caps=ResourceVector({name: min(cap, UNBOUNDED) for name, cap in spec.caps.items()}),
            action_concurrency=_held(spec.action_concurrency),
            run_concurrency=_held(spec.run_concurrency),
            depth=_held(spec.depth),
            clusters=(
                [cluster_of[c] for c in spec.clusters]
                if spec.clusters is not None
                else list(range(len(snapshot.clusters)))
            ),
        )
        for q, spec in enumerate(snapshot.queues)
    ]


class CompileCache:
    """What compile_snapshot keeps between the snapshots of one fleet (a replay's or a
    forecast's ticks, the service's ticks), where the fleet stays while work comes and goes:
    the container shapes matched to node pools, the lists of containers met in the last
    snapshot, and what each running action charges its queue and its nodes, compiled when it
    starts instead of at every tick. A snapshot of another fleet (its clusters, queues'
    routing and caps, placement dimensions or default GPU type) starts it afresh, and so does
    one past KEPT_SHAPES_MOST shapes; a list or a running action is known by identity (equal
    clusters by value), so a changed copy is compiled again."""

    def __init__(self) -> None:
        self._fleet: tuple[object, ...] | None = None
        self._clusters: object = None
        self._items: _ItemMaker | None = None
        # The compiled rows of the item maker's lists (Problem.fleet): every problem compiled
        # with this cache shares its lists and demands, so it shares their rows too.
        self.rows: list[Rows] = []
        self._running: dict[str, tuple[Action, ResourceVector, list[ContainerCharge]]] = {}
        self._seen: dict[str, tuple[Action, ResourceVector, list[ContainerCharge]]] = {}

    def item_maker(
        self, snapshot: Snapshot, dims: list[str], pools: list[PoolInfo], queues: list[QueueInfo]
    ) -> _ItemMaker:
        default_type = snapshot.settings.default_gpu_type
        fleet = (
            default_type,
            tuple(dims),
            tuple((q.name, tuple(q.clusters), tuple(q.caps.items())) for q in queues),
        )
        # The service reads its clusters anew each tick: equal ones are the same fleet.
        same_clusters = snapshot.clusters is self._clusters or snapshot.clusters == self._clusters
        if (
            self._items is None
            or fleet != self._fleet
            or not same_clusters
            or len(self._items.known) > KEPT_SHAPES_MOST
        ):
            self._fleet = fleet
            self._items = _ItemMaker(dims, pools, queues, default_type)
            self.rows = []
            self._running = {}
        self._clusters = snapshot.clusters
        # The same fleet's queues, compiled again for this snapshot, whose lists it meets.
        self._items.queues = queues
        return self._items

    def running(
        self,
        action: Action,
        queue: QueueInfo,
        items: _ItemMaker,
        cluster_of: dict[str, int],
        pool_of: dict[tuple[int, str], PoolInfo],
    ) -> tuple[ResourceVector, list[ContainerCharge]]:
        """What the running action charges its queue, and its containers their nodes."""
        known = self._running.get(action.id)
        if known is None or known[0] is not action:
            assert action.placement is not None
            placed, demand = items.of(action.containers, queue)
            cluster = cluster_of[action.placement.cluster]
            charges = _container_charges(placed, action.placement, cluster, pool_of)
            known = (action, demand, charges)
        self._seen[action.id] = known
        return known[1], known[2]

    def forget_ended(self) -> None:
        """Keep only the running actions of the snapshot just compiled."""
        self._running, self._seen = self._seen, {}


class _ItemMaker:
    """Containers as request vectors, each with the node pools it may use."""

    def __init__(
        self,
        dims: list[str],
        pools: list[PoolInfo],
        queues: list[QueueInfo],
        default_type: str | None,
    ) -> None:
        self.dims = dims
        self.dim_of = {name: d for d, name in enumerate(dims)}
        self.queues = queues
        self.default_type = default_type
        self.matcher = _PoolMatcher(pools, len(dims))
        # Lists of containers by their fields, each compiled once for every queue (or why it
        # cannot be); a queue's items and charge of a compiled list; and container shapes by
        # what their request vector depends on.
        self.lists: dict[tuple, _CompiledList | Exception] = {}
        self.known: dict[tuple[int, int], _Known] = {}
        # The compiled lists of the snapshot being compiled by list object (and field), each
        # held with its list, so that no other list takes its id while it is a key; and
        # those of the snapshot compiled before.
        self.list_of: dict[int, tuple[list[Container], str, _CompiledList | Exception]] = {}
        self.met: dict[int, tuple[list[Container], str, _CompiledList | Exception]] = {}
        self.requests: dict[tuple, _Request] = {}
        self.selectors: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        # Items by (queue, request) shape, the first made of each; and by shape and name.
        self.shapes: dict[tuple, Item] = {}
        self.named: dict[tuple, Item] = {}
        self.unmatched: list[tuple[Item, QueueInfo]] = []  # shapes whose pools are not known
        # Items made since the last `match`: a cache kept across a simulation's snapshots
        # (CompileCache) must not walk every item it ever made at each one.
        self.poolless: list[tuple[tuple, Item]] = []

    def of(
        self, containers: list[Container], queue: QueueInfo, field_name: str = "containers"
    ) -> tuple[list[Item], ResourceVector]:
        """The containers' items and what they charge their queue's caps; Unrepresentable
        names the field (`containers.0.resources.memory`, or `resources.memory` of an
        environment's replicas) the engine cannot hold.

        A line repeats a few hundred lists of containers over all its queues (707 among L's
        50,000 actions, 21,599 per queue): each list's checks, request vectors and charge
        are made once, and per queue only its items, shared by every action of it there
        (none is mutated). Snapshots share equal lists among their actions (the Arrow
        build's 5,871 lists for 102,000 actions, D410): a list object met before, in this
        snapshot or the one compiled before it (D451), costs one lookup by identity, then its
        queue's items by the list's number; its fields are read and hashed once per object."""
        held = self.list_of.get(id(containers))
        if held is None:
            held = self.met.get(id(containers))
            if held is not None:  # met in the snapshot before: the same object, so unchanged
                self.list_of[id(containers)] = held
        if held is not None and held[1] == field_name:
            compiled = held[2]
        else:
            compiled = self._compiled_by_fields(containers, field_name)
            if held is None:
                self.list_of[id(containers)] = (containers, field_name, compiled)
        if isinstance(compiled, Exception):
            raise compiled.with_traceback(None)  # raised again for each action of the list
        known = self.known.get((queue.index, compiled.number))
        if known is None:
            items = [
                self._item(name, request, queue.index)
                for name, request in zip(compiled.names, compiled.requests, strict=True)
            ]
            known = self.known[(queue.index, compiled.number)] = (items, compiled.demand)
        return known

    def end_snapshot(self) -> None:
        """Keep the list objects known by identity of the snapshot just compiled only: the
        next snapshot of a simulation or a service meets most of them again (CompileCache),
        and those of every snapshot would pile up."""
        self.met, self.list_of = self.list_of, {}

    def _compiled_by_fields(
        self, containers: list[Container], field_name: str
    ) -> _CompiledList | Exception:
        """The list compiled (or why it cannot be), by its containers' fields as they are (a
        typed and an untyped request of the default type are two keys for the same items)."""
        key = (field_name, *[container.fields() for container in containers])
        compiled = self.lists.get(key)
        if compiled is None:
            compiled = self.lists[key] = self._compile_list(containers, field_name)
        return compiled

    def _compile_list(
        self, containers: list[Container], field_name: str
    ) -> _CompiledList | Exception:
        try:
            _check_containers(containers, field_name)
        except (ArithmeticError, ValueError) as error:
            return error
        requests = [self._request(c) for c in containers]
        return _CompiledList(
            len(self.lists), [c.name for c in containers], requests, _demand(containers, requests)
        )

    def _request(self, container: Container) -> _Request:
        """The container's request vector, GPUs, device and selector: what its item is made
        of in any queue, and its pool match in a queue depends on."""
        gpu = container.gpu
        device = None
        if gpu is not None:
            device = gpu.device.canonical if gpu.device else self.default_type
        key = (
            tuple(container.resources.items()),
            gpu.count if gpu is not None else 0,
            device,
            tuple(container.node_selector.items()),
        )
        known = self.requests.get(key)
        if known is None:
            vector = np.zeros(len(self.dims), dtype=np.int64)
            for name, amount in container.resources.items():
                dim = self.dim_of.get(name)
                if dim is not None:
                    vector[dim] = amount
            vector[GPU_DIM] = key[1]
            number = len(self.requests)
            # Equal selectors one dict: the matcher knows a kind by its selector's identity.
            selector = self.selectors.get(key[3])
            if selector is None:
                selector = self.selectors[key[3]] = dict(key[3])
            known = self.requests[key] = _Request(number, vector, key[1], device, selector)
        return known

    def _item(self, name: str, request: _Request, queue: int) -> Item:
        # Most containers of a line repeat a few requests: one request vector and one pool
        # match per (queue, request), shared by every Item of that shape (none is mutated).
        shape = (queue, request.number)
        named = self.named.get((shape, name))
        if named is not None:
            return named
        known = self.shapes.get(shape)
        if known is None:
            item = known = self.shapes[shape] = Item(
                name, request.vector, request.gpus, request.device, request.selector
            )
            self.unmatched.append((item, self.queues[queue]))
        else:
            item = Item(name, known.request, known.gpus, known.device, known.selector)
        self.named[(shape, name)] = item
        self.poolless.append((shape, item))
        return item

    def match(self) -> None:
        """Give every item its node pools: each shape's matched together with the others
        (one numpy test per block of shapes), and shared by the items of that shape."""
        self.matcher.match(self.unmatched)
        self.unmatched = []
        for shape, item in self.poolless:
            known = self.shapes[shape]
            item.pools, item.all_pools = known.pools, known.all_pools
        self.poolless = []


@dataclass(frozen=True, slots=True)
class _Request:
    """A container's request, whatever its name and queue: the items made of it share the
    vector and the selector."""

    number: int  # its place among the requests made: one per key
    vector: np.ndarray
    gpus: int
    device: str | None
    selector: dict[str, str]


_Known = tuple[list[Item], ResourceVector]  # a queue's items of a list, and their charge


@dataclass(frozen=True, slots=True)
class _CompiledList:
    """A list of containers compiled for every queue: its names, requests and charge."""

    number: int  # its place among the lists compiled: one per key
    names: list[str]
    requests: list[_Request]
    demand: ResourceVector


def _demand(containers: list[Container], requests: list[_Request]) -> ResourceVector:
    """What the containers charge against their queue's caps: named resources first, then
    devices, then untyped GPUs, the order in which a broken cap is reported."""
    amounts: dict[str, int] = {}
    for container in containers:
        for name, amount in container.resources.items():
            amounts[name] = amounts.get(name, 0) + amount
    untyped = 0
    for request in requests:
        if request.gpus and request.device is not None:
            amounts[request.device] = amounts.get(request.device, 0) + request.gpus
        else:
            untyped += request.gpus
    if untyped:
        amounts[UNTYPED_GPU] = untyped
    return ResourceVector(amounts)


class _PoolMatcher:
    """Which node pools may take a container: accelerator, labels, and one empty node's room.

    Vectorised over every pool at once; GPU containers go only to pools of their device (an
    untyped one to whole NVIDIA GPUs, never a partition, and not to a type its queue caps
    below the request), CPU-only containers only to pools without accelerators, as on
    clusters whose GPU nodes are tainted.
    """

    def __init__(self, pools: list[PoolInfo], dims: int) -> None:
        self.pools = pools
        self.rooms = np.array([p.room for p in pools], dtype=np.int64).reshape(len(pools), dims)
        self.gpus = np.array([p.gpus_per_node for p in pools], dtype=np.int64)
        self.devices = np.array([p.device or "" for p in pools], dtype=object)
        self.whole_nvidia = np.array(
            [p.device is not None and p.nvidia and p.device.count("/") == 1 for p in pools],
            dtype=np.bool_,
        )
        self.cluster_of = np.array([p.cluster for p in pools], dtype=np.int64)
        self._selectors: dict[tuple, np.ndarray] = {}
        self._routes: dict[int, np.ndarray] = {}
        self._type_caps: dict[int, np.ndarray] = {}
        # Kinds (per queue) and requests by number, equal masks one number; the pools of a
        # (kind, request) pair; and equal pool sets as one.
        self._kinds: dict[tuple, int] = {}
        self._kind_of_selector: dict[tuple, tuple[dict[str, str], int]] = {}
        self._kind_masks: list[np.ndarray] = []
        self._kind_numbers: dict[bytes, int] = {}
        self._fits: dict[bytes, int] = {}
        self._fit_masks: list[np.ndarray] = []
        self._fit_numbers: dict[bytes, int] = {}
        self._pairs: dict[tuple[int, int], tuple[dict[int, list[int]], np.ndarray]] = {}
        self._groups: dict[bytes, tuple[dict[int, list[int]], np.ndarray]] = {}

    def match(self, shapes: list[tuple[Item, QueueInfo]]) -> None:
        """Set each item's pools: those of its kind with room for it on one empty node.

        What an item may use is its kind's pools (per queue: routing and type caps) that its
        request fits: each kind's mask and each request's fit are made once, and each pair
        of them ANDed once, a block of pairs per numpy call."""
        pairs = [(self._kind(item, queue), self._fit(item.request)) for item, queue in shapes]
        missing = list(dict.fromkeys(pair for pair in pairs if pair not in self._pairs))
        if missing:
            kinds, fits = np.array(self._kind_masks), np.array(self._fit_masks)
            for start in range(0, len(missing), MATCH_BLOCK):
                block = missing[start : start + MATCH_BLOCK]
                rows = kinds[[k for k, _ in block]] & fits[[f for _, f in block]]
                for pair, row in zip(block, rows, strict=True):
                    self._pairs[pair] = self._group(row)
        for (item, _), pair in zip(shapes, pairs, strict=True):
            item.pools, item.all_pools = self._pairs[pair]

    def _group(self, row: np.ndarray) -> tuple[dict[int, list[int]], np.ndarray]:
        """The pools of a 0/1 row by cluster, and all of them: equal pool sets share one
        mapping, which keeps later per-shape caches small."""
        key = row.tobytes()
        known = self._groups.get(key)
        if known is None:
            flat = np.flatnonzero(row)
            by_cluster: dict[int, list[int]] = {}
            for p in flat.tolist():
                by_cluster.setdefault(self.pools[p].cluster, []).append(p)
            known = self._groups[key] = (by_cluster, flat)
        return known

    def _fit(self, request: np.ndarray) -> int:
        """The number of the pools one empty node of which holds `request`."""
        key = request.tobytes()
        known = self._fits.get(key)
        if known is None:
            fits = np.asarray((self.rooms >= request.reshape(1, -1)).all(axis=1))
            known = self._fits[key] = self._numbered(fits, self._fit_masks, self._fit_numbers)
        return known

    def _kind(self, item: Item, queue: QueueInfo) -> int:
        """The number of the pools matching the container's accelerator, selector and
        routing, any size (queues routed alike share one)."""
        # Items of a request share its selector: by the selector's identity first (held in
        # the value, so the id stays its own), the sorted key only once per selector.
        shared = (queue.index, id(item.selector), item.device, item.gpus)
        seen = self._kind_of_selector.get(shared)
        if seen is not None and seen[0] is item.selector:
            return seen[1]
        key = (
            queue.index,
            item.device,
            item.gpus if item.untyped else item.gpus > 0,
            tuple(sorted(item.selector.items())) if item.selector else (),
        )
        known = self._kinds.get(key)
        if known is None:
            if item.gpus == 0:
                mask = self.gpus == 0
            elif item.device is not None:
                mask = self.devices == item.device
            else:
                mask = self.whole_nvidia & (self._type_cap(queue) >= item.gpus)
            mask = mask & self._routed(queue) & self._selected(item.selector)
            known = self._kinds[key] = self._numbered(mask, self._kind_masks, self._kind_numbers)
        self._kind_of_selector[shared] = (item.selector, known)
        return known

    @staticmethod
    def _numbered(mask: np.ndarray, masks: list[np.ndarray], numbers: dict[bytes, int]) -> int:
        """The mask's number among `masks`, equal masks one number."""
        key = mask.tobytes()
        number = numbers.get(key)
        if number is None:
            number = numbers[key] = len(masks)
            masks.append(mask)
        return number

    def _routed(self, queue: QueueInfo) -> np.ndarray:
        if queue.index not in self._routes:
            self._routes[queue.index] = np.isin(self.cluster_of, queue.clusters)
        return self._routes[queue.index]

    def _type_cap(self, queue: QueueInfo) -> np.ndarray:
        """Per pool, the queue's cap on its device type (no cap: unbounded)."""
        if queue.index not in self._type_caps:
            self._type_caps[queue.index] = np.array(
                [queue.caps.get(p.device or "", UNBOUNDED) for p in self.pools],
                dtype=np.int64,
            )
        return self._type_caps[queue.index]

    def _selected(self, selector: dict[str, str]) -> np.ndarray:
        key = tuple(sorted(selector.items()))
        if key not in self._selectors:
            self._selectors[key] = np.array(
                [all(p.labels.get(k) == v for k, v in key) for p in self.pools], dtype=bool
            )
        return self._selectors[key]


ContainerCharge = tuple[int, int, np.ndarray, int]
"""A running container's charge: (pool index, node, request held there, untyped GPUs)."""


def _container_charges(
    items: list[Item],
    placement: Placement,
    cluster: int,
    pool_of: dict[tuple[int, str], PoolInfo],
) -> list[ContainerCharge]:
    """Where running work's containers sit and what each holds there."""
    by_name = {item.name: item for item in items}
    charges = []
    for spot in placement.containers:
        pool = pool_of.get((cluster, spot.node_pool))
        if pool is None:
            continue  # a pool left out (its values are beyond the engine): no room to hold
        item = by_name[spot.name]
        untyped = item.gpus if item.untyped else 0
        charges.append((pool.index, spot.node, np.minimum(item.request, UNBOUNDED), untyped))
    return charges


def _charge_running(
    queue: QueueInfo,
    demand: ResourceVector,
    charges: list[ContainerCharge],
    pools: list[PoolInfo],
) -> None:
    """Running work holds its queue's caps and its nodes' room."""
    queue.held += demand
    for index, node, request, untyped in charges:
        pool = pools[index]
        pool.used[node] += request
        if node >= pool.nodes:
            pool.nodes = node + 1
        if untyped and pool.device is not None:
            queue.held = queue.held.plus(pool.device, untyped)
