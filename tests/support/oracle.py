"""A brute-force reference for one tick's admissions, independent of solver/.

It reads the issue's semantics literally and decides them by exhaustive search,
so it is slow and only meant for small snapshots (a handful of queued actions,
a few nodes including scale-up):

- Expired actions fail (MAX_QUEUED_TIME_EXCEEDED, DEADLINE_EXCEEDED); an action
  that could not be placed even with an empty queue on empty clusters at full
  scale fails INFEASIBLE.
- The rest are walked in the global order (queue priority descending, then
  submitted_at, then position in the actions list). An action is admitted iff
  some placement of it together with every action admitted before it in this
  tick, next to the fixed running work, satisfies every cap, concurrency limit
  and node's room. A strict_fifo queue stops at its first action that is not
  admitted; a greedy_capacity queue goes on.

Caps and limits use the "lowered below use" rule of the seed: an amount that is
already over its cap blocks only actions that add to it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import combinations, product

from models.devices import NVIDIA_GPU
from models.errors import ErrorCode
from models.resources import UNTYPED_GPU
from models.snapshot import (
    Action,
    ActionState,
    Container,
    Placement,
    Queue,
    Scheduling,
    Snapshot,
)

SLOTS = "@accelerators"
"""The accelerator count of a node, next to its cpu and memory in one room vector."""


@dataclass(frozen=True)
class Need:
    """One container's requests with the org default GPU type already applied."""

    resources: dict[str, int]  # cpu, memory, other named resources; SLOTS for accelerators
    gpus: int
    device: str | None  # canonical type; None is an untyped (any NVIDIA) request
    selector: dict[str, str]


@dataclass(frozen=True)
class PoolInfo:
    cluster: str
    name: str
    room: dict[str, int]
    device: str | None
    labels: dict[str, str]
    nodes: int
    full_scale: int

    def offers(self, need: Need) -> bool:
        """The pool has the container's accelerator and labels (size not considered)."""
        if any(self.labels.get(key) != value for key, value in need.selector.items()):
            return False
        if need.gpus == 0:
            return self.device is None  # CPU work stays off accelerator pools (the project's
            # reading, as tainted GPU pools do in Kubernetes; solver.placement.problem._fits_pool)
        if self.device is None:
            return False
        if need.device is None:
            return self.device.startswith(NVIDIA_GPU + "/")
        return self.device == need.device

    def fits_empty(self, need: Need) -> bool:
        return all(amount <= self.room.get(key, 0) for key, amount in need.resources.items())


@dataclass
class Item:
    """A queued action as the search sees it: its queue, run and what it adds."""

    action: str
    queue: str
    run: str
    needs: list[Need]  # empty when it joins a running (or just started) environment
    environment: str | None = None


@dataclass
class Verdict:
    admitted: list[str] = field(default_factory=list)  # in the global order
    failed: dict[str, ErrorCode] = field(default_factory=dict)
    waiting: list[str] = field(default_factory=list)
    head_blocked: set[str] = field(default_factory=set)  # strict queues stopped at a head
    ambiguous: list[str] = field(default_factory=list)
    """Actions that could never be placed although they pass the issue's enumerated fail-fast
    checks (a packing no aggregate sees, an untyped request only a too-small type cap could
    take): the spec does not say whether they fail or wait."""


class Oracle:
    """`waived`: actions that could never be placed but pass the enumerated checks, to be left
    waiting in line instead of failed (the spec allows either; see Verdict.ambiguous)."""

    def __init__(self, snapshot: Snapshot, waived: frozenset[str] = frozenset()) -> None:
        self.waived = waived
        self.snap = snapshot
        self.default_type = snapshot.settings.default_gpu_type
        self.queues = {q.name: q for q in snapshot.queues}
        self.pools = [
            PoolInfo(
                cluster.name,
                pool.name,
                {**pool.node.room, SLOTS: pool.node.accelerators},
                pool.node.accelerator,
                pool.labels,
                pool.nodes,
                pool.full_scale,
            )
            for cluster in snapshot.clusters
            for pool in cluster.node_pools
        ]
        self.pool_by_key = {(p.cluster, p.name): p for p in self.pools}
        self.envs = {e.name: e for e in snapshot.environments}
        self._fixed_usage()

    # -- the fixed world: running actions and running environments --------------

    def _fixed_usage(self) -> None:
        self.node_used: dict[tuple[str, str, int], dict[str, int]] = defaultdict(dict)
        self.queue_used: dict[str, dict[str, int]] = defaultdict(dict)
        self.running_count: dict[str, int] = defaultdict(int)
        self.active_runs: dict[str, set[str]] = defaultdict(set)
        for action in self.snap.actions:
            if action.state is not ActionState.RUNNING:
                continue
            self.running_count[action.queue] += 1
            self.active_runs[action.queue].add(action.run_id)
            if action.placement is not None:
                self._occupy(action.queue, action.containers, action.placement)
        for env in self.snap.environments:
            if env.running and env.placement is not None:
                self._occupy(env.queue, env.replica_containers(), env.placement)

    def _occupy(self, queue: str, containers: list[Container], placement: Placement) -> None:
        spots = {spot.name: spot for spot in placement.containers}
        for container in containers:
            spot = spots[container.name]
            pool = self.pool_by_key[(placement.cluster, spot.node_pool)]
            need = self.need(container)
            used = self.node_used[(pool.cluster, pool.name, spot.node)]
            for key, amount in need.resources.items():
                used[key] = used.get(key, 0) + amount
            for key, amount in self.charges(need, pool).items():
                self.queue_used[queue][key] = self.queue_used[queue].get(key, 0) + amount

    # -- requests and charges ----------------------------------------------------

    def need(self, container: Container) -> Need:
        request = container.gpu
        gpus = request.count if request else 0
        device = request.device.canonical if request and request.device else None
        if gpus and device is None:
            device = self.default_type
        resources = dict(container.resources)
        if gpus:
            resources[SLOTS] = gpus
        return Need(resources, gpus, device, dict(container.node_selector))

    def charges(self, need: Need, pool: PoolInfo) -> dict[str, int]:
        """What a container placed on `pool` counts against: its resources, its GPU type,
        and for an untyped request both max_gpus and the type it lands on."""
        charged = {key: amount for key, amount in need.resources.items() if key != SLOTS}
        if need.gpus:
            if need.device is None:
                charged[UNTYPED_GPU] = need.gpus
                assert pool.device is not None
                charged[pool.device] = need.gpus
            else:
                charged[need.device] = need.gpus
        return charged

    @staticmethod
    def caps(queue: Queue) -> dict[str, int]:
        caps = {**queue.max_resources, **queue.max_accelerators}
        if queue.max_gpus is not None:
            caps[UNTYPED_GPU] = queue.max_gpus
        return caps

    def routed(self, queue: str) -> list[str]:
        wanted = self.queues[queue].clusters
        return [c.name for c in self.snap.clusters if wanted is None or c.name in wanted]

    def env_needs(self, name: str) -> list[Need]:
        return [self.need(c) for c in self.envs[name].replica_containers()]

    # -- the walk ----------------------------------------------------------------

    def decide(self) -> Verdict:
        held = Counter(action.queue for action in self.snap.actions)
        if any(q.depth is not None and q.depth < held[q.name] for q in self.snap.queues):
            raise ValueError("the oracle does not model a depth the queue reaches")
        verdict = Verdict()
        order = global_order(self.snap)
        eligible: list[Action] = []
        for action in order:
            expired = self.expired(action)
            if expired is not None:
                verdict.failed[action.id] = expired
                continue
            payload = self.payload(action, started=set())
            never = not self.placeable([payload], empty=True)
            enumerated = self.spec_infeasible(action, payload)
            if never != enumerated:
                verdict.ambiguous.append(action.id)
            if enumerated or (never and action.id not in self.waived):
                verdict.failed[action.id] = ErrorCode.INFEASIBLE
                continue
            eligible.append(action)

        admitted: list[Item] = []
        started: set[str] = set()
        for action in eligible:
            queue = self.queues[action.queue]
            if action.queue in verdict.head_blocked:
                verdict.waiting.append(action.id)
                continue
            item = self.payload(action, started)
            if self.placeable([*admitted, item], empty=False):
                admitted.append(item)
                verdict.admitted.append(action.id)
                if action.environment is not None:
                    started.add(action.environment)
            else:
                verdict.waiting.append(action.id)
                if queue.scheduling is Scheduling.STRICT_FIFO:
                    verdict.head_blocked.add(action.queue)
        return verdict

    def expired(self, action: Action) -> ErrorCode | None:
        now = self.snap.now
        if (
            action.max_queued_time is not None
            and now - action.submitted_at > action.max_queued_time
        ):
            return ErrorCode.MAX_QUEUED_TIME_EXCEEDED
        deadline = action.deadline_at()
        if deadline is not None and now > deadline:
            return ErrorCode.DEADLINE_EXCEEDED
        return None

    def payload(self, action: Action, started: set[str]) -> Item:
        """What admitting `action` adds: its containers, or the replicas of the environment
        it starts, or nothing when it joins a pool that is already up."""
        env = action.environment
        if env is None:
            needs = [self.need(c) for c in action.containers]
        elif self.envs[env].running or env in started:
            needs = []
        else:
            needs = self.env_needs(env)
        return Item(action.id, action.queue, action.run_id, needs, env)

    # -- the enumerated fail-fast checks (to flag readings, not to decide) --

    def spec_infeasible(self, action: Action, item: Item) -> bool:
        if not item.needs:
            return False
        caps = self.caps(self.queues[action.queue])
        total: dict[str, int] = defaultdict(int)
        for need in item.needs:
            for key, amount in need.resources.items():
                if key != SLOTS:
                    total[key] += amount
            if need.gpus:
                total[need.device or UNTYPED_GPU] += need.gpus
        if any(amount > caps[key] for key, amount in total.items() if key in caps):
            return True  # larger than a cap even when the queue is empty
        routed = set(self.routed(action.queue))
        pools = [p for p in self.pools if p.cluster in routed]
        for need in item.needs:
            if need.gpus and not any(p.offers(Need({}, need.gpus, need.device, {})) for p in pools):
                return True  # an accelerator none of the routed clusters has
            if not any(p.offers(need) and p.fits_empty(need) for p in pools):
                return True  # a container larger than any (matching) node
        return not any(
            self._fits_cluster_in_aggregate(item.needs, c)
            and self._type_caps_take_untyped(item.needs, c, caps, total)
            for c in routed
        )

    def _fits_cluster_in_aggregate(self, needs: list[Need], cluster: str) -> bool:
        """Every container has a node here, and every group of them fits, at full scale, the
        pools any of them could use (judged per group: containers confined to a few pools
        must fit those)."""
        pools = [p for p in self.pools if p.cluster == cluster]
        if not all(any(p.offers(n) and p.fits_empty(n) for p in pools) for n in needs):
            return False
        for size in range(1, len(needs) + 1):
            for group in combinations(needs, size):
                matching = [p for p in pools if any(p.offers(n) and p.fits_empty(n) for n in group)]
                wanted: dict[str, int] = defaultdict(int)
                for need in group:
                    for key, amount in need.resources.items():
                        wanted[key] += amount
                if any(
                    amount > sum(p.room.get(key, 0) * p.full_scale for p in matching)
                    for key, amount in wanted.items()
                ):
                    return False
        return True

    def _type_caps_take_untyped(
        self, needs: list[Need], cluster: str, caps: dict[str, int], total: dict[str, int]
    ) -> bool:
        """Some choice of a GPU type for each untyped container (one its pools here have)
        keeps every type cap, next to the typed requests of the same type."""
        untyped = [n for n in needs if n.gpus and n.device is None]
        choices = [
            sorted(
                {
                    str(p.device)
                    for p in self.pools
                    if p.cluster == cluster and p.offers(n) and p.fits_empty(n)
                }
            )
            for n in untyped
        ]
        for chosen in product(*choices):
            landed: dict[str, int] = defaultdict(int)
            for need, device in zip(untyped, chosen, strict=True):
                landed[device] += need.gpus
            if all(
                device not in caps or total.get(device, 0) + gpus <= caps[device]
                for device, gpus in landed.items()
            ):
                return True
        return False

    # -- exhaustive placement ----------------------------------------------------

    def placeable(self, items: list[Item], *, empty: bool) -> bool:
        """Whether all `items` can be placed at once. `empty` asks about an empty queue on
        empty clusters at full scale (concurrency does not matter then)."""
        if not empty and not self._counts_hold(items):
            return False
        queue_used = {} if empty else self.queue_used
        node_used = {} if empty else self.node_used
        nodes = [
            (pool, index, dict(node_used.get((pool.cluster, pool.name, index), {})))
            for pool in self.pools
            for index in range(pool.full_scale)
        ]
        added: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        flat = [(i, need) for i, item in enumerate(items) for need in item.needs]
        chosen: dict[int, str] = {}

        def over(queue: str, charged: dict[str, int]) -> bool:
            caps = self.caps(self.queues[queue])
            used = queue_used.get(queue, {})
            return any(
                key in caps and used.get(key, 0) + added[queue][key] + amount > caps[key]
                for key, amount in charged.items()
                if amount
            )

        def place(k: int) -> bool:
            if k == len(flat):
                return True
            i, need = flat[k]
            item = items[i]
            routed = self.routed(item.queue)
            tried: set[tuple[str, str, tuple[tuple[str, int], ...]]] = set()
            for pool, _index, used in nodes:
                if pool.cluster not in routed or chosen.get(i, pool.cluster) != pool.cluster:
                    continue
                if not pool.offers(need):
                    continue
                signature = (
                    pool.cluster,
                    pool.name,
                    tuple(sorted(k for k in used.items() if k[1])),
                )
                if signature in tried:
                    continue  # an identical node of the same pool: same subtree
                tried.add(signature)
                room = pool.room
                if any(
                    used.get(key, 0) + a > room.get(key, 0) for key, a in need.resources.items()
                ):
                    continue
                charged = self.charges(need, pool)
                if over(item.queue, charged):
                    continue
                first = i not in chosen
                chosen[i] = pool.cluster
                for key, a in need.resources.items():
                    used[key] = used.get(key, 0) + a
                for key, a in charged.items():
                    added[item.queue][key] += a
                if place(k + 1):
                    return True
                for key, a in need.resources.items():
                    used[key] -= a
                for key, a in charged.items():
                    added[item.queue][key] -= a
                if first:
                    del chosen[i]
            return False

        return place(0)

    def _counts_hold(self, items: list[Item]) -> bool:
        """Concurrency and the caps that do not depend on placement, with the seed's rule for
        limits lowered below use: only an amount that grows is held to its limit."""
        by_queue: dict[str, list[Item]] = defaultdict(list)
        for item in items:
            by_queue[item.queue].append(item)
        for name, members in by_queue.items():
            queue = self.queues[name]
            limit = queue.action_concurrency
            if limit is not None and self.running_count[name] + len(members) > limit:
                return False
            active = self.active_runs[name]
            new_runs = {m.run for m in members} - active
            limit = queue.run_concurrency
            if limit is not None and new_runs and len(active) + len(new_runs) > limit:
                return False
            caps = self.caps(queue)
            added: dict[str, int] = defaultdict(int)
            for need in (need for m in members for need in m.needs):
                for key, amount in need.resources.items():
                    added[key] += amount
                if need.gpus:
                    added[need.device or UNTYPED_GPU] += need.gpus
            used = self.queue_used[name]
            if any(
                amount and key in caps and used.get(key, 0) + amount > caps[key]
                for key, amount in added.items()
            ):
                return False
        return True


def decide(snapshot: Snapshot, waived: frozenset[str] = frozenset()) -> Verdict:
    return Oracle(snapshot, waived).decide()


def global_order(snapshot: Snapshot) -> list[Action]:
    """The pending actions by queue priority (highest first), submitted_at, list position."""
    priority = {q.name: q.priority for q in snapshot.queues}
    position = {action.id: index for index, action in enumerate(snapshot.actions)}
    pending = [a for a in snapshot.actions if a.state is ActionState.QUEUED]
    return sorted(pending, key=lambda a: (-priority[a.queue], a.submitted_at, position[a.id]))
