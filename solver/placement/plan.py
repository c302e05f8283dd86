"""A tick's plan in progress: what is admitted, where it sits, and what it charges.

The plan answers the two cheap questions of the tick: does a unit fit its
queue's caps and concurrency limits now (exact, placement-free), and can a
best-fit pass put its containers on nodes (a heuristic: a failure here is only
a candidate for the model, never a verdict).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from models.resources import EMPTY, ResourceKind, ResourceVector, kind_of, spelled
from models.result import WaitReason
from solver.placement.landing import LandingOrder
from solver.placement.problem import ActionInfo, Item, Problem
from solver.placement.room import (
    ACTION_LIMIT,
    CAP,
    RUN_LIMIT,
    SATURATED,
    RoomLedger,
    name_id,
    name_of,
)

if TYPE_CHECKING:
    from solver.placement.room import Found

Spot = tuple[int, int]  # (pool index, node index)
UnitKey = tuple[str, int]  # ("action", action index) or ("env", environment index)
NO_FIT_MEMORY = 32  # failed requests remembered per (queue, pool sets); later ones are not
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


class QueueUsage:
    """A queue's use with this tick's admissions, as results and explanations report it."""

    __slots__ = ("_added", "_admitted", "_held", "_queue", "runs")

    def __init__(
        self, held: ResourceVector, runs: set[str], admitted: np.ndarray, queue: int
    ) -> None:
        self._held = held  # as QueueInfo.held, exact (the ledger's copy saturates)
        # Amounts added since `held` was last read, in order: a walk admits thousands and
        # reads none (the ledger checks the caps), so they are summed when read.
        self._added: list[tuple[str, int]] = []
        self.runs = runs  # active runs (the ledger reads this set)
        self._admitted = admitted  # the ledger's count of admissions per queue
        self._queue = queue

    @property
    def held(self) -> ResourceVector:
        if self._added:
            amounts = dict(self._held.items())
            for name, amount in self._added:
                amounts[name] = amounts.get(name, 0) + amount
            self._held, self._added = ResourceVector(amounts), []
        return self._held

    @held.setter
    def held(self, value: ResourceVector) -> None:
        self._held, self._added = value, []

    def add(self, name: str, amount: int) -> None:
        """`amount` more of `name` (less, when negative)."""
        self._added.append((name, amount))

    def add_all(self, amounts: ResourceVector) -> None:
        self._added.extend(amounts.items())

    @property
    def admitted(self) -> int:
        return int(self._admitted[self._queue])


class Plan:
    """Mutable tick state over a compiled problem: admissions, where they sit, what they hold.

    The numbers every action reads and changes (nodes' free room, queues' use of their caps,
    the fleet's free room per kind of pool, clusters' loads) are the arrays of a compiled
    RoomLedger (solver.placement.room), which also runs the loops over them; this class keeps
    who is where, and what results and explanations report.
    """

    def __init__(self, problem: Problem, first_fit: bool = False) -> None:
        self.problem = problem
        # The plain first-fit rule (clusters, pools, containers and nodes in order) that
        # admission systems commonly use; the tick keeps it as the floor of its answer.
        self.first_fit = first_fit
        fleet = problem.fleet()
        dims = len(problem.dims)
        rooms = [pool.room - pool.used for pool in problem.pools]
        free_rows = np.ascontiguousarray(
            np.concatenate(rooms) if rooms else np.zeros((0, dims)), dtype=np.int64
        )
        opened_rows = np.concatenate(
            [np.arange(pool.max_nodes) < pool.nodes for pool in problem.pools]
            or [np.zeros(0, dtype=np.bool_)]
        )
        cluster_used = np.zeros((len(problem.cluster_names), dims))
        for pool in problem.pools:
            cluster_used[pool.cluster] += pool.used.sum(axis=0) * pool.declared
        # Free room summed over the fleet per kind of pool (its device, "" without one): moving
        # work between nodes never changes these, so they bound what any repacking can free.
        kind_free = np.zeros((fleet.names, dims))
        for pool, room in zip(problem.pools, rooms, strict=True):
            kind_free[name_id(pool.device or "")] += room.sum(axis=0) * pool.declared
        held = np.zeros((len(problem.queues), fleet.names), dtype=np.int64)
        for q, queue in enumerate(problem.queues):
            _count(held[q], queue.held)
        landing = LandingOrder(problem, _by_kind(problem, kind_free))
        self.room = RoomLedger(
            fleet,
            first_fit,
            free_rows,
            opened_rows,
            cluster_used,
            kind_free,
            held,
            landing,
            NO_FIT_MEMORY,
        )
        self._views()
        self.usage = [
            QueueUsage(q.held, set(q.active_runs), self.room.admitted, q.index)
            for q in problem.queues
        ]
        self._refusals: dict[tuple, Refusal] = {}  # by what the ledger answered
        self.admitted: dict[int, NodeAssignment | None] = {}  # None: joined a pool, nothing placed
        self.env_started: dict[int, NodeAssignment] = {}
        self.pool_units: dict[int, set[UnitKey]] = {}  # who this tick placed work in a pool
        self.node_units: dict[Spot, set[UnitKey]] = {}  # and on a node
        # Stamped anew whenever a node's units or where they sit change: what is worked out
        # about a node's units (solver.placement.repair) holds while its stamp does.
        self.node_stamps: dict[Spot, int] = {}
        self.pool_top: dict[int, tuple[int, str]] = {}  # highest queue priority placed there
        # Admissions whose room is taken at the next `settle` (solver.placement.resume).
        self.deferred: list[tuple[UnitKey, int, list[Item], NodeAssignment]] = []
        self.moves = 0  # units moved so far: a resumed walk's nodes may then have less room

    def _views(self) -> None:
        """Each pool's rows of the ledger's node arrays, as the rest of the engine reads them."""
        ends = np.cumsum([pool.max_nodes for pool in self.problem.pools], dtype=np.int64)
        starts = ends - [pool.max_nodes for pool in self.problem.pools]
        rows, opened = self.room.free_rows, self.room.opened_rows
        self.free = [rows[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        self.opened = [opened[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]

    @property
    def landing(self) -> LandingOrder:
        return self.room.landing

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
        return self._placing(action)[2]

    def charge_of(self, action: ActionInfo) -> ResourceVector:
        if action.env is None:
            return action.demand
        return self._placing(action)[1]

    def _placing(self, action: ActionInfo) -> tuple[int | None, ResourceVector, list[Item]]:
        """The reusable pool admitting `action` would start (None if none), what admitting it
        charges its queue, and the containers it places."""
        if action.env is None:
            return None, action.demand, action.items
        env = self.env_to_start(action)
        if env is None:
            return None, EMPTY, []
        return env, self.problem.envs[env].demand, self.problem.envs[env].items

    # -- placement-free checks -----------------------------------------------------------

    def refusal(self, action: ActionInfo, device_caps: bool = True) -> Refusal | None:
        """The first concurrency limit or cap that admitting `action` now would break.

        With `device_caps` False, the per-device caps are left to the caller (the model
        checks them where untyped GPUs may land on a capped device).
        """
        demand = self.charge_of(action)
        found = self.room.refusal(
            action.queue, action.run, self.usage[action.queue].runs, demand, device_caps
        )
        return None if found is None else self.refusal_in_words(action.queue, found, demand)

    def refusal_in_words(
        self, queue_index: int, found: tuple[int, ...], demand: ResourceVector
    ) -> Refusal:
        """The words of what the ledger found (solver.placement.room.RoomLedger.refusal)."""
        code = found[0]
        amount = demand.amount(name_of(found[1])) if code == CAP else 0
        key = (queue_index, found, amount)
        known = self._refusals.get(key)
        if known is not None:
            return known
        queue = self.problem.queues[queue_index]
        if code == RUN_LIMIT:
            refusal = Refusal(
                WaitReason.RUN_CONCURRENCY,
                f"run concurrency {found[1]} of {queue.run_concurrency}",
            )
        elif code == ACTION_LIMIT:
            refusal = Refusal(
                WaitReason.ACTION_CONCURRENCY,
                f"action concurrency {found[1]} of {queue.action_concurrency}",
            )
        else:
            name, held = name_of(found[1]), found[2]
            label = "untyped gpus" if kind_of(name) is ResourceKind.UNTYPED_GPU else name
            refusal = Refusal(
                WaitReason.QUEUE_CAP,
                f"queue {queue.name}, {label}: {spelled(name, held)} of"
                f" {spelled(name, queue.caps[name])} in use, needs {spelled(name, amount)}",
                name,
            )
        self._refusals[key] = refusal
        return refusal

    def untyped_landed(self, queue_index: int, device: str) -> int:
        """Untyped GPUs of the queue that this tick's placements landed on `device`."""
        return self.room.untyped_landed_on(queue_index, device)

    # -- placement -----------------------------------------------------------------------

    def candidate_clusters(self, items: list[Item], queue_index: int) -> list[int]:
        """Clusters where every item has a compatible pool, least loaded first."""
        routed = self.problem.queues[queue_index].clusters
        clusters = [c for c in routed if all(c in item.pools for item in items)]
        if len(clusters) > 1:
            loads = self.room.loads.tolist()
            clusters.sort(key=lambda c: (loads[c], c))
        return clusters

    def find_placement(self, action: ActionInfo) -> NodeAssignment | None:
        """Best-fit the unit's containers into the least loaded cluster that takes them all
        (with `first_fit`: the first cluster, pool and node that take them, in order), unless
        a request no smaller on the same pools found no room before and none came back."""
        items = self.items_to_place(action)
        if not items:
            return None
        return _assignment(self.room.find_placement(action.queue, items, self.charge_of(action)))

    def best_placement(
        self, queue_index: int, items: list[Item], charge: ResourceVector
    ) -> NodeAssignment | None:
        """Best-fit of a unit's containers on the room left now, not asking the memory of
        requests that found none (`charge`: what the unit adds to its queue's device caps
        besides the untyped GPUs it lands)."""
        return _assignment(self.room.best_placement(queue_index, items, charge))

    def fleet_may_hold(self, items: list[Item]) -> bool:
        """A bound no repacking can beat: the fleet's free room of each kind of pool.

        Work on a device's pools stays on that device's pools, except untyped GPUs, which
        may move to any other NVIDIA device; CPU-only work stays on pools without one.
        """
        return bool(self.room.fleet_may_hold(items))

    # -- resuming ------------------------------------------------------------------------

    def fork(self, problem: Problem | None = None) -> Plan:
        """A copy to go on from (solver.placement.resume), on `problem` when given: this
        plan's problem with queue settings changed, nodes added to pools, running work
        taken out, or pools added after the others (pools and queues by the same index)."""
        self.settle()
        new = copy.copy(self)
        new.deferred = []
        new.room = self.room.fork()
        new._views()
        new.usage = [
            QueueUsage(u.held, set(u.runs), new.room.admitted, q) for q, u in enumerate(self.usage)
        ]
        new.admitted = dict(self.admitted)
        new.env_started = dict(self.env_started)
        new.pool_units = {p: set(keys) for p, keys in self.pool_units.items()}
        new.node_units = {spot: set(keys) for spot, keys in self.node_units.items()}
        new.node_stamps = dict(self.node_stamps)
        new.pool_top = dict(self.pool_top)
        new._refusals = {}  # the copy's problem may cap its queues otherwise
        if problem is not None and problem is not self.problem:
            new._rebase(problem)
        return new

    def _rebase(self, problem: Problem) -> None:
        """Go on over `problem`: the ledger made again for its fleet, with this plan's
        admissions where they are, and the room the change gives."""
        old, room = self.problem, self.room
        self.problem = problem
        fleet = problem.fleet()
        dims = len(problem.dims)
        gained: dict[str, np.ndarray] = {}  # room at the tick's start, by kind of pool
        frees: list[np.ndarray] = []
        opened: list[np.ndarray] = []
        returns = room.room_returns.tolist()
        cluster_used = room.cluster_used.copy()
        kind_free = np.zeros((fleet.names, dims))
        kind_free[: room.kind_free.shape[0]] = room.kind_free
        changed = False
        for p, pool in enumerate(problem.pools):
            kind = pool.device or ""
            if p >= len(old.pools):
                # A pool added by the change: no work on it yet.
                free = pool.room - pool.used
                frees.append(free)
                opened.append(np.arange(pool.max_nodes) < pool.nodes)
                returns.append(0)
                more = free.sum(axis=0) * pool.declared
                changed = True
            else:
                was = old.pools[p]
                frees.append(self.free[p])
                opened.append(self.opened[p])
                if pool.used is was.used:
                    continue
                # Running work taken out frees its room; nodes added come empty.
                freed = was.used - pool.used[: was.max_nodes]
                fresh = pool.room - pool.used[was.max_nodes :]
                frees[p] = np.concatenate([self.free[p] + freed, fresh])
                opened[p] = np.concatenate([self.opened[p], np.zeros(len(fresh), dtype=np.bool_)])
                returns[p] += 1
                more = (freed.sum(axis=0) + fresh.sum(axis=0)) * pool.declared
                cluster_used[pool.cluster] -= freed.sum(axis=0) * pool.declared
                changed = True
            kind_free[name_id(kind)] += more
            gained[kind] = gained.get(kind, 0) + more
        held = np.zeros((len(problem.queues), fleet.names), dtype=np.int64)
        for q, (was_queue, queue) in enumerate(zip(old.queues, problem.queues, strict=True)):
            usage = self.usage[q]
            if queue is not was_queue:
                if queue.held is not was_queue.held:
                    delta = {name: -amount for name, amount in was_queue.held.items()}
                    usage.held = usage.held + delta + queue.held
                if queue.active_runs != was_queue.active_runs:
                    usage.runs = set(queue.active_runs) | {
                        problem.actions[i].run
                        for i in self.admitted
                        if problem.actions[i].queue == q
                    }
            _count(held[q], usage.held)
        self.room = RoomLedger(
            fleet,
            self.first_fit,
            np.ascontiguousarray(
                np.concatenate(frees) if frees else np.zeros((0, dims)), dtype=np.int64
            ),
            np.concatenate(opened or [np.zeros(0, dtype=np.bool_)]),
            cluster_used,
            kind_free,
            held,
            room.landing.rebased(problem, gained),
            NO_FIT_MEMORY,
        )
        self.room.room_returns[:] = returns
        self.room.admitted[:] = room.admitted
        self.room.env_started[:] = room.env_started
        names = room.untyped_on.shape[0]
        self.room.untyped_on[:names] = room.untyped_on
        self.room.untyped_landed[:, :names] = room.untyped_landed
        if not changed:
            self.room.no_fit.update(room.no_fit)  # no room came back: what failed still does
        self._views()
        for q, usage in enumerate(self.usage):
            self.usage[q] = QueueUsage(usage.held, usage.runs, self.room.admitted, q)

    # -- commit --------------------------------------------------------------------------

    def admit(
        self, action: ActionInfo, placement: NodeAssignment | None, defer_room: bool = False
    ) -> None:
        """With `defer_room`, what the action holds of nodes is taken at the next `settle`,
        with every other deferred admission at once; caps and limits count it at once."""
        self.room.admit(
            action.queue,
            action.run,
            self.usage[action.queue].runs,
            self.items_to_place(action),
            self.charge_of(action),
            None if placement is None else placement.spots,
            self.env_to_start(action),
            not defer_room,
        )
        self._record(action, placement, defer_room)

    def record(
        self,
        admitted: list[tuple[ActionInfo, Found | None]],
        placed: Callable[[int, list[Item]], None] | None = None,
    ) -> None:
        """Record who sits where after the ledger admitted these, in order (its walks counted
        their numbers); `placed` is told each placed unit's queue and containers first."""
        for action, found in admitted:
            placement = _assignment(found)
            if placed is not None and placement is not None:
                placed(action.queue, self.items_to_place(action))
            self._record(action, placement, False)

    def _record(
        self, action: ActionInfo, placement: NodeAssignment | None, defer_room: bool
    ) -> None:
        """An admission as results report it: what its queue holds, its run, where it sits."""
        usage = self.usage[action.queue]
        env, charge, items = self._placing(action)
        usage.add_all(charge)
        usage.runs.add(action.run)
        if placement is not None:
            key: UnitKey = ("env", env) if env is not None else ("action", action.index)
            self._report_landing(action.queue, items, placement, +1)
            if defer_room:
                self.deferred.append((key, action.queue, items, placement))
            else:
                self._place_unit(key, action.queue, placement, +1)
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
        self._report_landing(queue_index, items, placement, sign)
        self.room.land(queue_index, items, [p for p, _ in placement.spots], sign)

    def _report_landing(
        self, queue_index: int, items: list[Item], placement: NodeAssignment, sign: int
    ) -> None:
        """The untyped GPUs of `items` in their queue's reported use, by the device they land
        on (the ledger counts them for the caps)."""
        usage = self.usage[queue_index]
        for device, gpus in self._landed(items, placement).items():
            usage.add(device, sign * gpus)

    def _landed(self, items: list[Item], placement: NodeAssignment) -> dict[str, int]:
        """What the untyped GPUs of `items` charge the devices they land on at `placement`
        (typed ones are charged by their request, wherever they land)."""
        landed: dict[str, int] = {}
        for item, (p, _) in zip(items, placement.spots, strict=True):
            if item.device is None and item.gpus:
                device = self.problem.pools[p].device
                if device is not None:
                    landed[device] = landed.get(device, 0) + item.gpus
        return landed

    def lands_over_a_cap(self, action: ActionInfo, placement: NodeAssignment) -> bool:
        """Whether admitting `action` at `placement` breaks a cap of its queue, its untyped
        GPUs counted on the devices they land on (`refusal`, without a placement, counts
        typed requests only)."""
        landed = self._landed(self.items_to_place(action), placement)
        if not landed:
            return False
        return self.room.cap_refusal(action.queue, self.charge_of(action) + landed) is not None

    def _take_room(
        self,
        key: UnitKey,
        queue_index: int,
        items: list[Item],
        placement: NodeAssignment,
        sign: int,
    ) -> None:
        """Take (sign +1) or give back (-1) the room of `items` at `placement`."""
        self._place_unit(key, queue_index, placement, sign)
        pools = [p for p, _ in placement.spots]
        self.room.take_room(items, pools, [node for _, node in placement.spots], sign, True)

    def _place_unit(
        self, key: UnitKey, queue_index: int, placement: NodeAssignment, sign: int
    ) -> None:
        """Who sits where: the unit put on (sign +1) or taken off (-1) its nodes."""
        if sign > 0:
            queue = self.problem.queues[queue_index]
            for spot in placement.spots:
                p = spot[0]
                if p in self.pool_units:
                    self.pool_units[p].add(key)
                else:
                    self.pool_units[p] = {key}
                if spot in self.node_units:
                    self.node_units[spot].add(key)
                else:
                    self.node_units[spot] = {key}
                self.node_stamps[spot] = next(_STAMPS)
                if p not in self.pool_top or self.pool_top[p][0] < queue.priority:
                    self.pool_top[p] = (queue.priority, queue.name)
        else:
            for spot in placement.spots:
                self.pool_units.get(spot[0], set()).discard(key)
                self.node_units.get(spot, set()).discard(key)
                self.node_stamps[spot] = next(_STAMPS)

    def hold(self, items: list[Item], placement: NodeAssignment, sign: int) -> None:
        """Take (sign +1) or give back (-1) the nodes' room of `items` at `placement`, and
        nothing else the plan keeps: a trial placement (solver.placement.repair), undone by
        the opposite sign, never an admission or a move."""
        self.room.hold(
            items, [p for p, _ in placement.spots], [node for _, node in placement.spots], sign
        )

    def settle(self) -> None:
        """Take the room of every admission made with `defer_room`, as `admit` would have
        one by one, with the largest room and the loads worked out once at the end: for a
        walk that admits thousands of the tick's admissions again between the few actions
        whose placement it asks about."""
        if not self.deferred:
            return
        deferred, self.deferred = self.deferred, []
        pools: set[int] = set()
        for key, q, items, placement in deferred:
            self._place_unit(key, q, placement, +1)
            where = [p for p, _ in placement.spots]
            self.room.take_room(items, where, [node for _, node in placement.spots], +1, False)
            pools.update(where)
        clusters = {self.problem.pools[p].cluster for p in pools}
        self.room.refresh(sorted(pools), sorted(clusters))


def _assignment(found: Found | None) -> NodeAssignment | None:
    """A placement as the ledger finds it: (cluster, each container's pool, and node)."""
    if found is None:
        return None
    cluster, pools, nodes = found
    return NodeAssignment(cluster, tuple(zip(pools, nodes, strict=True)))


def _count(row: np.ndarray, amounts: ResourceVector) -> None:
    """A queue's use by name number, as the ledger keeps it (saturated: see room.pyx)."""
    for name, amount in amounts.items():
        k = name_id(name)
        if k < len(row):
            row[k] = min(amount, SATURATED)


def _by_kind(problem: Problem, kind_free: np.ndarray) -> dict[str, np.ndarray]:
    """Free room per kind of pool of the fleet, by its device ("" without one)."""
    kinds = dict.fromkeys(p.device or "" for p in problem.pools)
    return {kind: kind_free[name_id(kind)] for kind in kinds}
