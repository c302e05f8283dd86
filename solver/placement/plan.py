"""A tick's plan in progress: what is admitted, where it sits, and what it charges.

The plan answers the two cheap questions of the tick: does a unit fit its
queue's caps and concurrency limits now (exact, placement-free), and can a
best-fit pass put its containers on nodes (a heuristic: a failure here is only
a candidate for the model, never a verdict).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field

import numpy as np

from models.devices import NVIDIA_GPU
from models.resources import EMPTY, ResourceKind, ResourceVector, kind_of, spelled
from models.result import WaitReason
from solver.placement.landing import LandingOrder
from solver.placement.problem import CPU_DIM, GPU_DIM, ActionInfo, Item, Problem

Spot = tuple[int, int]  # (pool index, node index)
UnitKey = tuple[str, int]  # ("action", action index) or ("env", environment index)
NO_FIT_MEMORY = 32  # failed requests remembered per (queue, pool sets); later ones are not
NO_NODE = np.iinfo(np.int64).max  # more room than any node has: never the tightest
# Numbers for Plan.node_stamps, never given twice in the process: a plan and its forks each
# stamp their own changes, so a node of the same stamp in two of them holds the same units.
_STAMPS = itertools.count(1)


@dataclass(frozen=True)
class NodeAssignment:
    """Where a unit's containers sit, by index: the solver's form of models.snapshot.Placement
    (solver.placement.decode names the cluster, pools and nodes)."""

    cluster: int
    spots: tuple[Spot, ...]  # one per item, in item order


@dataclass(frozen=True)
class Refusal:
    """Why a unit cannot be admitted: a WaitReason with the resource and a sentence."""

    reason: WaitReason
    message: str
    resource: str | None = None


# Cap refusals by (id of the demand, whether device caps count), each with its demand (held).
_CapAnswers = dict[tuple[int, bool], tuple[ResourceVector, Refusal | None]]


@dataclass
class QueueUsage:
    held: ResourceVector  # as QueueInfo.held, with this tick's admissions
    admitted: int
    runs: set[str]
    untyped_landed: dict[str, int] = field(default_factory=dict)  # this tick's, by device


class Plan:
    """Mutable tick state over a compiled problem: admissions, where they sit, what they hold."""

    def __init__(self, problem: Problem, first_fit: bool = False) -> None:
        self.problem = problem
        # The plain first-fit rule (clusters, pools, containers and nodes in order) that
        # admission systems commonly use; the tick keeps it as the floor of its answer.
        self.first_fit = first_fit
        self.free = [pool.room - pool.used for pool in problem.pools]
        self.opened = [np.arange(pool.max_nodes) < pool.nodes for pool in problem.pools]
        self.usage = [QueueUsage(q.held, 0, set(q.active_runs)) for q in problem.queues]
        # Per queue, the use `cap_refusal` last answered against (held, so its identity is its
        # own), and its answer by demand.
        self._cap_answers: dict[int, tuple[ResourceVector, _CapAnswers]] = {}
        self.admitted: dict[int, NodeAssignment | None] = {}  # None: joined a pool, nothing placed
        self.env_started: dict[int, NodeAssignment] = {}
        self.pool_units: dict[int, set[UnitKey]] = {}  # who this tick placed work in a pool
        self.node_units: dict[Spot, set[UnitKey]] = {}  # and on a node
        # Stamped anew whenever a node's units or where they sit change: what is worked out
        # about a node's units (solver.placement.repair) holds while its stamp does.
        self.node_stamps: dict[Spot, int] = {}
        self.pool_top: dict[int, tuple[int, str]] = {}  # highest queue priority placed there
        self.cluster_used = np.zeros((len(problem.cluster_names), len(problem.dims)))
        for pool in problem.pools:
            self.cluster_used[pool.cluster] += pool.used.sum(axis=0) * pool.declared
        # Python floats, not an array: sorting clusters reads them one by one.
        self.loads = [0.0] * len(problem.cluster_names)
        self._set_load_dims()
        # Requests best-fit found no room for, per queue and pool sets: room only shrinks as
        # work is admitted, so a request no smaller fails too, until something moves out.
        # Each shape's failures are rows of one array, tested together.
        self.no_fit: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}
        # The most room of any one node, per pool and dimension: a cheap test before the nodes.
        self.max_free = np.array(
            [
                f.max(axis=0) if len(f) else np.zeros(len(problem.dims), dtype=np.int64)
                for f in self.free
            ],
            dtype=np.int64,
        ).reshape(len(self.free), len(problem.dims))
        # How often room came back to each pool's nodes: a request no node of a pool had room
        # for still finds none while its count stays (room only shrinks meanwhile). By pool
        # and request, the count at which `_best_node` found no node.
        self.room_returns = [0] * len(problem.pools)
        self._no_node: dict[tuple[int, int], tuple[np.ndarray, int]] = {}
        # Free room summed over the fleet per kind of pool (its device, "" without one): moving
        # work between nodes never changes these, so they bound what any repacking can free.
        self.class_free: dict[str, np.ndarray] = {}
        for pool, free in zip(problem.pools, self.free, strict=True):
            total = self.class_free.setdefault(pool.device or "", np.zeros(len(problem.dims)))
            total += free.sum(axis=0) * pool.declared
        self.untyped_on: dict[str, int] = {}  # this tick's untyped GPUs per device, all queues
        self.landing = LandingOrder(problem, self.class_free)
        # Admissions whose room is taken at the next `settle` (solver.placement.resume).
        self.deferred: list[tuple[UnitKey, int, list[Item], NodeAssignment]] = []
        self.moves = 0  # units moved so far: a resumed walk's nodes may then have less room

    def units(self) -> dict[UnitKey, tuple[int, list[Item], NodeAssignment]]:
        """Every placed unit of this tick: its queue, its containers and where they sit."""
        keys: list[UnitKey] = [("action", i) for i, p in self.admitted.items() if p is not None]
        keys += [("env", e) for e in self.env_started]
        return {key: self.unit(key) for key in keys}

    def unit(self, key: UnitKey) -> tuple[int, list[Item], NodeAssignment]:
        kind, index = key
        if kind == "env":
            env = self.problem.envs[index]
            return env.queue, env.items, self.env_started[index]
        action = self.problem.actions[index]
        placement = self.admitted[index]
        assert placement is not None, "joining a running pool is no unit"
        return action.queue, action.items, placement

    # -- what a unit needs ---------------------------------------------------------------

    def env_to_start(self, action: ActionInfo) -> int | None:
        """The reusable pool admitting `action` would start, if it would start one."""
        if action.env is None or self.problem.envs[action.env].running:
            return None
        return None if action.env in self.env_started else action.env

    def starts_env(self, action: ActionInfo) -> bool:
        return self.env_to_start(action) is not None

    def unit_key(self, action: ActionInfo) -> UnitKey:
        """The unit whose containers admitting `action` places: its own, or its pool's."""
        env = self.env_to_start(action)
        return ("env", env) if env is not None else ("action", action.index)

    def items_to_place(self, action: ActionInfo) -> list[Item]:
        if action.env is None:
            return action.items
        return self.problem.envs[action.env].items if self.starts_env(action) else []

    def charge_of(self, action: ActionInfo) -> ResourceVector:
        if action.env is None:
            return action.demand
        if self.starts_env(action):
            return self.problem.envs[action.env].demand
        return EMPTY

    # -- placement-free checks -----------------------------------------------------------

    def refusal(self, action: ActionInfo, device_caps: bool = True) -> Refusal | None:
        """The first concurrency limit or cap that admitting `action` now would break.

        With `device_caps` False, the per-device caps are left to the caller (the model
        checks them where untyped GPUs may land on a capped device).
        """
        queue = self.problem.queues[action.queue]
        usage = self.usage[action.queue]
        if (
            queue.run_concurrency is not None
            and action.run not in usage.runs
            and len(usage.runs) >= queue.run_concurrency
        ):
            return Refusal(
                WaitReason.RUN_CONCURRENCY,
                f"run concurrency {len(usage.runs)} of {queue.run_concurrency}",
            )
        in_flight = queue.running + usage.admitted
        if queue.action_concurrency is not None and in_flight >= queue.action_concurrency:
            return Refusal(
                WaitReason.ACTION_CONCURRENCY,
                f"action concurrency {in_flight} of {queue.action_concurrency}",
            )
        return self.cap_refusal(action.queue, self.charge_of(action), device_caps)

    def cap_refusal(
        self, queue_index: int, demand: ResourceVector, device_caps: bool = True
    ) -> Refusal | None:
        held = self.usage[queue_index].held
        # The answer for one demand holds while the queue's use does: the line asks it of
        # every action of a shape, most often while its queue admits nothing.
        memo = self._cap_answers.get(queue_index)
        if memo is None or memo[0] is not held:
            memo = self._cap_answers[queue_index] = (held, {})
        known = memo[1].get((id(demand), device_caps))
        if known is not None and known[0] is demand:
            return known[1]
        refusal = None
        queue = self.problem.queues[queue_index]
        for name, amount, cap in demand.over(held, queue.caps):
            kind = kind_of(name)
            if kind is ResourceKind.DEVICE and not device_caps:
                continue
            label = "untyped gpus" if kind is ResourceKind.UNTYPED_GPU else name
            refusal = Refusal(
                WaitReason.QUEUE_CAP,
                f"queue {queue.name}, {label}: {spelled(name, held.amount(name))} of"
                f" {spelled(name, cap)} in use, needs {spelled(name, amount)}",
                name,
            )
            break
        memo[1][(id(demand), device_caps)] = (demand, refusal)
        return refusal

    # -- placement -----------------------------------------------------------------------

    def candidate_clusters(self, items: list[Item], queue_index: int) -> list[int]:
        """Clusters where every item has a compatible pool, least loaded first."""
        routed = self.problem.queues[queue_index].clusters
        clusters = [c for c in routed if all(c in item.pools for item in items)]
        if len(clusters) > 1:
            clusters.sort(key=lambda c: (self.loads[c], c))
        return clusters

    def _set_load_dims(self) -> None:
        """The dimensions each cluster declares, and its full-scale room of them."""
        self.load_dims = [np.flatnonzero(room > 0) for room in self.problem.cluster_room]
        self.load_totals = [
            room[dims] for room, dims in zip(self.problem.cluster_room, self.load_dims, strict=True)
        ]
        for cluster in range(len(self.problem.cluster_names)):
            self._update_load(cluster)

    def _update_load(self, cluster: int) -> None:
        """Share of the cluster's full-scale room in use, on its scarcest dimension."""
        nonzero = self.load_dims[cluster]
        if len(nonzero):
            self.loads[cluster] = float(
                (self.cluster_used[cluster][nonzero] / self.load_totals[cluster]).max()
            )

    def find_placement(self, action: ActionInfo) -> NodeAssignment | None:
        """Best-fit the unit's containers into the least loaded cluster that takes them all
        (with `first_fit`: the first cluster, pool and node that take them, in order)."""
        items = self.items_to_place(action)
        if not items:
            return None
        shape = (action.queue, self.problem.unit_shape(items).pools)
        wanted = self.problem.unit_shape(items).wanted
        failed = self.no_fit.get(shape)
        if failed is not None and np.logical_and.reduce(failed <= wanted, axis=1).any():
            return None
        placement = self.best_placement(action.queue, items, self.charge_of(action))
        if placement is None:
            if failed is None:
                self.no_fit[shape] = wanted[None, :]
            elif len(failed) < NO_FIT_MEMORY:
                self.no_fit[shape] = np.vstack([failed, wanted])
        return placement

    def best_placement(
        self, queue_index: int, items: list[Item], charge: ResourceVector
    ) -> NodeAssignment | None:
        """Best-fit of a unit's containers on the room left now, not asking the memo of
        requests that found none (`charge`: what the unit adds to its queue's device caps
        besides the untyped GPUs it lands)."""
        # Clusters where every container has a pool with a node big enough: a cheap first cut.
        # The pools passing it are the only ones the nodes are searched in.
        clusters: set[int] | None = None
        roomy: list[set[int]] = []
        for item in items:
            # The ufunc's own reduce: ndarray.all goes through a Python wrapper, and this runs
            # for every container best-fit places.
            roomiest = self.max_free[item.all_pools]
            pools = item.all_pools[np.logical_and.reduce(roomiest >= item.request, axis=1)]
            roomy.append(set(pools.tolist()))
            reachable = set(self.problem.pool_cluster[pools].tolist())
            clusters = reachable if clusters is None else clusters & reachable
            if not clusters:
                return None
        assert clusters is not None
        loads = self.loads
        load = (lambda c: c) if self.first_fit else (lambda c: (loads[c], c))
        for cluster in sorted(clusters, key=load):
            spots = self._fit_in_cluster(items, roomy, cluster, queue_index, charge)
            if spots is not None:
                return NodeAssignment(cluster, spots)
        return None

    def _fit_in_cluster(
        self,
        items: list[Item],
        roomy: list[set[int]],
        cluster: int,
        queue_index: int,
        charge: ResourceVector,
    ) -> tuple[Spot, ...] | None:
        """Each item on a node of its pools in `cluster`, only among its `roomy` pools (those
        with a node of room for it, by `max_free`)."""
        queue = self.problem.queues[queue_index]
        usage = self.usage[queue_index]
        taken: list[tuple[int, int, np.ndarray]] = []
        # An untyped container landing on a capped device shares the cap with the unit's own
        # typed request for it (only device names are looked up here).
        device_extra = dict(charge.items())
        spots: list[Spot | None] = [None] * len(items)
        # Larger containers first: they have the fewest nodes to choose from.
        order = (
            sorted(
                range(len(items)),
                key=lambda i: (
                    (0, i) if self.first_fit else (-items[i].gpus, -items[i].request[CPU_DIM])
                ),
            )
            if len(items) > 1
            else [0]
        )
        ok = True
        for k, i in enumerate(order):
            item = items[i]
            spot = None
            pools = item.pools[cluster]
            if item.untyped and not self.first_fit:
                pools = self.landing.order(pools)
            for p in pools:
                if p not in roomy[i]:
                    continue
                device = self.problem.pools[p].device
                if item.untyped and device is not None and device in queue.caps:
                    held = usage.held.amount(device) + device_extra.get(device, 0)
                    if held + item.gpus > queue.caps[device]:
                        continue
                slot = self._best_node(p, item.request)
                if slot is not None:
                    spot = (p, slot)
                    break
            if spot is None:
                ok = False
                break
            p, slot = spot
            if k < len(order) - 1:  # held while the unit's other containers are placed
                self.free[p][slot] -= item.request
                taken.append((p, slot, item.request))
            spots[i] = spot
            landed = self.problem.pools[p].device
            if item.untyped and landed is not None and landed in queue.caps:
                device_extra[landed] = device_extra.get(landed, 0) + item.gpus
        for p, slot, request in taken:
            self.free[p][slot] += request
            self.room_returns[p] += 1
        if not ok:
            return None
        return tuple(spot for spot in spots if spot is not None)

    def _best_node(self, pool: int, request: np.ndarray) -> int | None:
        """The open node the request fills most tightly, else the first fresh node with room.
        (The caller only asks of pools whose roomiest node, by `max_free`, takes it.)"""
        known = self._no_node.get((pool, id(request)))
        if known is not None and known[0] is request and known[1] == self.room_returns[pool]:
            return None
        free = self.free[pool]
        fits = np.logical_and.reduce(free >= request, axis=1)
        first = int(fits.argmax()) if len(free) else 0  # the first node with room, if any has
        if not len(free) or not fits[first]:
            self._no_node[(pool, id(request))] = (request, self.room_returns[pool])
            return None
        if self.first_fit:  # nodes up now come first in index order, then new ones
            return first
        open_fits = fits & self.opened[pool]
        dim = GPU_DIM if request[GPU_DIM] else CPU_DIM
        # The least room left on that dimension, the lowest index among equals.
        tightest = int(np.where(open_fits, free[:, dim], NO_NODE).argmin())
        return tightest if open_fits[tightest] else first

    def fleet_may_hold(self, items: list[Item]) -> bool:
        """A bound no repacking can beat: the fleet's free room of each kind of pool.

        Work on a device's pools stays on that device's pools, except untyped GPUs, which
        may move to any other NVIDIA device; CPU-only work stays on pools without one.
        """
        shape = self.problem.unit_shape(items)
        untyped = shape.untyped_gpus
        for key, need in shape.needs:
            room = self.class_free.get(key)
            if room is None:
                return False
            if key:
                if need[GPU_DIM] > room[GPU_DIM] + self.untyped_on.get(key, 0):
                    return False
            elif (need > room).any():
                return False
        if untyped:
            nvidia = sum(
                free[GPU_DIM]
                for key, free in self.class_free.items()
                if key.startswith(NVIDIA_GPU + "/") and key.count("/") == 1
            )
            if untyped > nvidia:
                return False
        return True

    # -- resuming ------------------------------------------------------------------------

    def fork(self, problem: Problem | None = None) -> Plan:
        """A copy to go on from (solver.placement.resume), on `problem` when given: this
        plan's problem with queue settings changed, nodes added to pools, running work
        taken out, or pools added after the others (pools and queues by the same index)."""
        self.settle()
        new = copy.copy(self)
        new.deferred = []
        new.free = [f.copy() for f in self.free]
        new.opened = [o.copy() for o in self.opened]
        new.usage = [
            QueueUsage(u.held, u.admitted, set(u.runs), dict(u.untyped_landed)) for u in self.usage
        ]
        new.admitted = dict(self.admitted)
        new.env_started = dict(self.env_started)
        new.pool_units = {p: set(keys) for p, keys in self.pool_units.items()}
        new.node_units = {spot: set(keys) for spot, keys in self.node_units.items()}
        new.node_stamps = dict(self.node_stamps)
        new.pool_top = dict(self.pool_top)
        new.cluster_used = self.cluster_used.copy()
        new.loads = list(self.loads)
        new.no_fit = dict(self.no_fit)  # its arrays are replaced, never written in place
        new.max_free = self.max_free.copy()
        new._cap_answers = {}  # the copy's problem may cap its queues otherwise
        new.room_returns = list(self.room_returns)
        new._no_node = dict(self._no_node)  # what it found holds on the copy's equal room
        new.class_free = {kind: free.copy() for kind, free in self.class_free.items()}
        new.untyped_on = dict(self.untyped_on)
        if problem is not None and problem is not self.problem:
            new._rebase(problem)
        return new

    def _rebase(self, problem: Problem) -> None:
        old = self.problem
        self.problem = problem
        gained: dict[str, np.ndarray] = {}  # room at the tick's start, by kind of pool
        kept = problem.pools[: len(old.pools)]
        for p, (was, pool) in enumerate(zip(old.pools, kept, strict=True)):
            if pool.used is was.used:
                continue
            # Running work taken out frees its room; nodes added come empty.
            freed = was.used - pool.used[: was.max_nodes]
            fresh = pool.room - pool.used[was.max_nodes :]
            self.free[p] = np.concatenate([self.free[p] + freed, fresh])
            self.room_returns[p] += 1
            self.opened[p] = np.concatenate([self.opened[p], np.zeros(len(fresh), dtype=np.bool_)])
            more = (freed.sum(axis=0) + fresh.sum(axis=0)) * pool.declared
            self.cluster_used[pool.cluster] -= freed.sum(axis=0) * pool.declared
            self.class_free[pool.device or ""] += more
            gained[pool.device or ""] = gained.get(pool.device or "", 0) + more
            self.max_free[p] = self.free[p].max(axis=0)
            self.no_fit.clear()  # room came back: what failed may fit now
        for pool in problem.pools[len(old.pools) :]:
            # A pool added by the change: no work on it yet.
            free = pool.room - pool.used
            self.free.append(free)
            self.room_returns.append(0)
            self.opened.append(np.arange(pool.max_nodes) < pool.nodes)
            self.max_free = np.vstack([self.max_free, free.max(axis=0, initial=0)])
            more = free.sum(axis=0) * pool.declared
            total = self.class_free.setdefault(pool.device or "", np.zeros(len(problem.dims)))
            total += more
            gained[pool.device or ""] = gained.get(pool.device or "", 0) + more
            self.no_fit.clear()
        for q, (was_queue, queue) in enumerate(zip(old.queues, problem.queues, strict=True)):
            if queue is was_queue:
                continue
            usage = self.usage[q]
            if queue.held is not was_queue.held:
                delta = {name: -amount for name, amount in was_queue.held.items()}
                usage.held = usage.held + delta + queue.held
            if queue.active_runs != was_queue.active_runs:
                usage.runs = set(queue.active_runs) | {
                    problem.actions[i].run for i in self.admitted if problem.actions[i].queue == q
                }
        self.landing = self.landing.rebased(problem, gained)
        self._set_load_dims()

    # -- commit --------------------------------------------------------------------------

    def admit(
        self, action: ActionInfo, placement: NodeAssignment | None, defer_room: bool = False
    ) -> None:
        """With `defer_room`, what the action holds of nodes is taken at the next `settle`,
        with every other deferred admission at once; caps and limits count it at once."""
        usage = self.usage[action.queue]
        env = self.env_to_start(action)
        usage.held += self.charge_of(action)
        usage.admitted += 1
        usage.runs.add(action.run)
        items = self.items_to_place(action)
        if placement is not None:
            key: UnitKey = ("env", env) if env is not None else ("action", action.index)
            self._land(action.queue, items, placement, +1)
            if defer_room:
                self.deferred.append((key, action.queue, items, placement))
            else:
                self._take_room(key, action.queue, items, placement, +1)
        if env is not None:
            assert placement is not None, "a pool starts where it is placed"
            self.env_started[env] = placement
            self.admitted[action.index] = None
        else:
            self.admitted[action.index] = placement

    def move(self, key: UnitKey, placement: NodeAssignment) -> None:
        """Put an admitted unit somewhere else (the model found room by moving it)."""
        queue, items, old = self.unit(key)
        self.moves += 1
        for spot, sign in ((old, -1), (placement, +1)):
            self._land(queue, items, spot, sign)
            self._take_room(key, queue, items, spot, sign)
        kind, index = key
        if kind == "env":
            self.env_started[index] = placement
        else:
            self.admitted[index] = placement

    def _land(
        self, queue_index: int, items: list[Item], placement: NodeAssignment, sign: int
    ) -> None:
        """Charge (sign +1) or give back (-1) the untyped GPUs of `items` to the devices they
        land on at `placement`: device caps count them."""
        usage = self.usage[queue_index]
        for item, (p, _) in zip(items, placement.spots, strict=True):
            if item.device is not None or not item.gpus:
                continue  # typed or no GPUs: charged by its request, wherever it lands
            device = self.problem.pools[p].device
            if device is not None:
                usage.held = usage.held.plus(device, sign * item.gpus)
                usage.untyped_landed[device] = (
                    usage.untyped_landed.get(device, 0) + sign * item.gpus
                )
                self.untyped_on[device] = self.untyped_on.get(device, 0) + sign * item.gpus

    def _take_room(
        self,
        key: UnitKey,
        queue_index: int,
        items: list[Item],
        placement: NodeAssignment,
        sign: int,
    ) -> None:
        """Take (sign +1) or give back (-1) the room of `items` at `placement`."""
        queue = self.problem.queues[queue_index]
        touched: set[int] = set()
        for item, (p, slot) in zip(items, placement.spots, strict=True):
            pool = self.problem.pools[p]
            held = item.request * pool.declared
            touched.add(pool.cluster)
            if sign > 0:
                self.free[p][slot] -= item.request
                self.cluster_used[pool.cluster] += held
                self.class_free[pool.device or ""] -= held
                self.opened[p][slot] = True
                self.pool_units.setdefault(p, set()).add(key)
                self.node_units.setdefault((p, slot), set()).add(key)
                self.node_stamps[(p, slot)] = next(_STAMPS)
                if p not in self.pool_top or self.pool_top[p][0] < queue.priority:
                    self.pool_top[p] = (queue.priority, queue.name)
            else:
                self.free[p][slot] += item.request
                self.room_returns[p] += 1
                self.cluster_used[pool.cluster] -= held
                self.class_free[pool.device or ""] += held
                self.pool_units.get(p, set()).discard(key)
                self.node_units.get((p, slot), set()).discard(key)
                self.node_stamps[(p, slot)] = next(_STAMPS)
                self.no_fit.clear()  # room came back: what failed may fit now
        for cluster in touched:
            self._update_load(cluster)
        for p in {p for p, _ in placement.spots}:
            self.max_free[p] = self.free[p].max(axis=0)

    def hold(self, items: list[Item], placement: NodeAssignment, sign: int) -> None:
        """Take (sign +1) or give back (-1) the nodes' room of `items` at `placement`, and
        nothing else the plan keeps: a trial placement (solver.placement.repair), undone by
        the opposite sign, never an admission or a move."""
        for item, (p, slot) in zip(items, placement.spots, strict=True):
            self.free[p][slot] -= sign * item.request
            if sign < 0:
                self.room_returns[p] += 1
        for p in {p for p, _ in placement.spots}:
            self.max_free[p] = self.free[p].max(axis=0)

    def settle(self) -> None:
        """Take the room of every admission made with `defer_room`, as `admit` would have
        one by one, in whole arrays: for a walk that admits thousands of the tick's
        admissions again between the few actions whose placement it asks about."""
        if not self.deferred:
            return
        deferred, self.deferred = self.deferred, []
        pools: list[int] = []
        slots: list[int] = []
        requests: list[np.ndarray] = []
        queues = self.problem.queues
        pool_units, node_units, stamps, top = (
            self.pool_units, self.node_units, self.node_stamps, self.pool_top
        )  # fmt: skip
        for key, q, items, placement in deferred:
            queue = queues[q]
            for item, spot in zip(items, placement.spots, strict=True):
                p = spot[0]
                pools.append(p)
                slots.append(spot[1])
                requests.append(item.request)
                if p in pool_units:
                    pool_units[p].add(key)
                else:
                    pool_units[p] = {key}
                if spot in node_units:
                    node_units[spot].add(key)
                else:
                    node_units[spot] = {key}
                stamps[spot] = next(_STAMPS)
                if p not in top or top[p][0] < queue.priority:
                    top[p] = (queue.priority, queue.name)
        if not pools:
            return
        where = np.array(pools)
        nodes = np.array(slots)
        wanted = np.stack(requests)
        problem = self.problem
        held = wanted * problem.pool_declared()[where]
        np.add.at(self.cluster_used, problem.pool_cluster[where], held)
        # Each pool's entries at once, in their order: one stable sort instead of a mask of
        # every entry per pool.
        by_pool = np.argsort(where, kind="stable")
        ranked = where[by_pool]
        cuts = np.flatnonzero(ranked[1:] != ranked[:-1]) + 1
        for mine in np.split(by_pool, cuts):
            p = int(where[mine[0]])
            np.subtract.at(self.free[p], nodes[mine], wanted[mine])
            self.opened[p][nodes[mine]] = True
            self.max_free[p] = self.free[p].max(axis=0)
            self.class_free[problem.pools[p].device or ""] -= held[mine].sum(axis=0)
        for cluster in np.unique(problem.pool_cluster[where]).tolist():
            self._update_load(cluster)
