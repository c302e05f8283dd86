"""Why an action can never run, and the smallest changes that would make it feasible.

Judged as fail-fast judges it (solver.placement.failfast): against an empty queue and empty
clusters at full scale. Every reason is given, not only the first: each cap the
request exceeds, and for every cluster the queue routes to, each container that no
node pool could take (no pool with its accelerator, a selector no pool's labels
match, larger than the largest node) or a total larger than the cluster at full scale.

Suggestions are candidates checked before they are offered: each is applied to the
action alone (solver.explain.changes) and fail-fast must then accept it; then the tick is
re-run with it (solver.explain.replay), which must not fail the action, and the suggestion
says whether that tick runs it or why it keeps it waiting.
"""

from __future__ import annotations

import math

import numpy as np

from models.errors import ErrorCode
from models.explanation import (
    Change,
    ChangeKind,
    Explanation,
    ExplanationState,
    Reason,
    ReasonKind,
    Suggestion,
)
from models.quantity import format_quantity
from models.resources import EMPTY, UNTYPED_GPU, ResourceKind, ResourceVector, kind_of
from models.snapshot import Action, ActionState, Snapshot
from solver.explain.changes import apply_changes
from solver.explain.replay import Replayed, Replayer, listed, who_runs
from solver.explain.waiting import cap_amount, cap_setting, counted
from solver.placement.failfast import (
    Failure,
    describe_item,
    fail_fast,
    over_cap_text,
    short_of_room,
    untyped_caps_text,
    untyped_type_caps_refuse,
)
from solver.placement.problem import (
    GPU_DIM,
    UNBOUNDED,
    ActionInfo,
    Item,
    PoolInfo,
    Problem,
    compile_snapshot,
)

MOST_SUGGESTIONS = 4
MOST_ROUTES = 2
# A fix can uncover the next reason: a selector that matches, then the size, then the total.
FIX_ROUNDS = 4


def alone(snapshot: Snapshot, action: Action) -> Snapshot:
    """The snapshot with only `action`, queued: what fail-fast judges it against."""
    queued = action.model_copy(update={"state": ActionState.QUEUED, "placement": None})
    return snapshot.model_copy(
        update={
            "actions": [queued],
            "environments": [e for e in snapshot.environments if e.name == action.environment],
            "scheduling_policies": [],
            "service_environments": [],
            "job_queues": [],
            "jobs": [],
        }
    )


def failure_alone(snapshot: Snapshot, action: Action) -> Failure | None:
    """Fail-fast's verdict on `action` by itself (expiry included)."""
    problem = compile_snapshot(alone(snapshot, action))
    return fail_fast(problem).get(0)


def explain_failed(
    snapshot: Snapshot, action: Action, failure: Failure, replayer: Replayer
) -> Explanation:
    """`replayer` re-runs the tick of a snapshot holding `action` queued."""
    if failure.code is not ErrorCode.INFEASIBLE:
        return Explanation(
            action=action.id,
            queue=action.queue,
            state=ExplanationState.FAILED,
            code=failure.code.value,
            message=failure.message,
            items=[Reason(kind=ReasonKind.EXPIRED, queue=action.queue, message=failure.message)],
            as_of=snapshot.now,
        )
    solo = alone(snapshot, action)
    problem = compile_snapshot(solo)
    if problem.unrepresentable(problem.actions[0]) is not None:
        # A value beyond the engine's range: the message names it, and no change to the
        # fleet or the queue would make room for it.
        return Explanation(
            action=action.id,
            queue=action.queue,
            state=ExplanationState.FAILED,
            code=failure.code.value,
            message=failure.message,
            as_of=snapshot.now,
        )
    reasons = _Reasons(problem, problem.actions[0])
    items = reasons.caps() + reasons.clusters()
    if not items:
        # Feasible against the current settings (they changed since it failed).
        message = (
            f"{action.id} failed: {failure.message}; with the current queue and cluster settings"
            " it would be feasible"
        )
        return Explanation(
            action=action.id,
            queue=action.queue,
            state=ExplanationState.FAILED,
            code=failure.code.value,
            message=message,
            as_of=snapshot.now,
        )
    fixes = _Fixes(solo, problem, reasons, action, replayer)
    suggestions = fixes.suggestions()
    return Explanation(
        action=action.id,
        queue=action.queue,
        state=ExplanationState.FAILED,
        code=failure.code.value,
        message=f"{action.id} can never run: {items[0].message}"
        + (f" (and {len(items) - 1} more)" if len(items) > 1 else ""),
        items=items,
        suggestions=suggestions,
        unproven=fixes.unproven,
        ruled_out=fixes.ruled_out,
        replays=replayer.replays,
        as_of=snapshot.now,
    )


def _units(problem: Problem, action: ActionInfo) -> tuple[list[Item], ResourceVector]:
    """The containers to place and the demand: the action's, or its environment's."""
    if action.env is not None:
        env = problem.envs[action.env]
        return env.items, env.demand
    return action.items, action.demand


def _matching(item: Item, pools: list[PoolInfo]) -> list[PoolInfo]:
    """Pools with the container's kind of node: its device, any whole NVIDIA GPU, or none."""
    if item.gpus == 0:
        return [p for p in pools if not p.gpus_per_node]
    if item.device is not None:
        return [p for p in pools if p.device == item.device]
    return [p for p in pools if p.nvidia and p.device.count("/") == 1]  # type: ignore[union-attr]


def _labelled(item: Item, pools: list[PoolInfo]) -> list[PoolInfo]:
    return [p for p in pools if all(p.labels.get(k) == v for k, v in item.selector.items())]


def _dim_text(problem: Problem, d: int, amount: int) -> str:
    if d == GPU_DIM:
        return counted(amount, "GPU")
    name = problem.dims[d]
    return f"{name} {format_quantity(name, amount)}"


def _over(problem: Problem, d: int, requested: int, limit: int) -> str:
    """`cpu 48 > 32`, `4 GPUs > 2`."""
    bound = str(limit) if d == GPU_DIM else format_quantity(problem.dims[d], limit)
    return f"{_dim_text(problem, d, requested)} > {bound}"


class _Reasons:
    def __init__(self, problem: Problem, action: ActionInfo) -> None:
        self.problem = problem
        self.action = action
        self.queue = problem.queues[action.queue]
        self.items, self.demand = _units(problem, action)
        self.refused: dict[int, list[Reason]] = {}  # cluster -> why it can never run there

    def caps(self) -> list[Reason]:
        q = self.queue
        kinds = {
            ResourceKind.NAMED: ReasonKind.QUEUE_CAP,
            ResourceKind.DEVICE: ReasonKind.DEVICE_CAP,
            ResourceKind.UNTYPED_GPU: ReasonKind.UNTYPED_GPU_CAP,
        }
        return [
            Reason(
                kind=kinds[kind_of(name)],
                queue=q.name,
                resource=name,
                requested=amount,
                limit=cap,
                message=over_cap_text(q.name, name, amount, cap),
            )
            for name, amount, cap in self.demand.reported().over(EMPTY, q.caps)
        ]

    def capped(self, item: Item, pool: PoolInfo) -> int | None:
        """The queue's cap on the pool's device when it keeps an untyped request off it."""
        if not item.untyped or pool.device is None:
            return None
        cap = self.queue.caps.get(pool.device)
        return cap if cap is not None and cap < item.gpus else None

    def clusters(self) -> list[Reason]:
        problem, q = self.problem, self.queue
        if not problem.cluster_names:
            return []  # no fleet described: placement cannot be judged
        if not q.clusters:
            return [
                Reason(
                    kind=ReasonKind.NO_CLUSTER,
                    queue=q.name,
                    message=f"queue {q.name} routes to no cluster",
                )
            ]
        for c in q.clusters:
            found = self.cluster(c)
            if not found:
                return []  # one cluster could run it: placement is not why it failed
            self.refused[c] = found
        return [reason for c in q.clusters for reason in self.refused[c]]

    def cluster(self, c: int) -> list[Reason]:
        """Why cluster `c` could never run the action (empty: it could)."""
        problem = self.problem
        name = problem.cluster_names[c]
        pools = [problem.pools[p] for p in problem.pools_of_cluster[c]]
        found = [
            reason
            for item in self.items
            if not item.pools.get(c)
            for reason in [self._container(item, name, pools)]
        ]
        if found:
            return found
        lacking = short_of_room(problem, c, self.items)
        if lacking is None:
            return self._type_caps(c, name)
        total, capacity = lacking.total, lacking.capacity
        over = [d for d in range(len(problem.dims)) if total[d] > capacity[d]]
        d = over[0]
        shown = ", ".join(_over(problem, o, int(total[o]), int(capacity[o])) for o in over)
        pools_used = ", ".join(problem.pools[p].name for p in lacking.pools)
        who = (
            f"its total request is more than pools {pools_used}"
            if lacking.whole
            else f"containers {', '.join(lacking.containers)} need more than pools {pools_used},"
            " the only ones that take them,"
        )
        return [
            Reason(
                kind=ReasonKind.LARGER_THAN_CLUSTER,
                queue=self.queue.name,
                cluster=name,
                resource=problem.dims[d],
                requested=int(total[d]),
                limit=int(capacity[d]),
                message=f"cluster {name}: {who} have at full scale ({shown})",
            )
        ]

    def _type_caps(self, c: int, cluster: str) -> list[Reason]:
        """The untyped GPU containers together find no GPU type whose cap takes them."""
        caps = untyped_type_caps_refuse(self.problem, c, self.items, self.queue, self.demand)
        if caps is None:
            return []
        untyped = [item for item in self.items if item.untyped]
        # The type every untyped container may use, if there is one: raising its cap to what
        # they need together (next to the typed requests on it) is the fix offered.
        shared = set(caps).intersection(
            *({str(self.problem.pools[p].device) for p in item.pools[c]} for item in untyped)
        )
        device = min(shared or caps)
        return [
            Reason(
                kind=ReasonKind.DEVICE_CAP,
                queue=self.queue.name,
                cluster=cluster,
                resource=device,
                requested=self.demand.amount(device) + sum(item.gpus for item in untyped),
                limit=caps[device],
                message=f"cluster {cluster}: "
                + untyped_caps_text(self.items, self.queue.name, caps),
            )
        ]

    def _container(self, item: Item, cluster: str, pools: list[PoolInfo]) -> Reason:
        problem = self.problem
        what = describe_item(item, problem.dims)
        base = Reason(
            kind=ReasonKind.NO_ACCELERATOR,
            message="",
            queue=self.queue.name,
            cluster=cluster,
            container=item.name,
        )
        matching = _matching(item, pools)
        if not matching:
            offered = sorted({p.device for p in pools if p.device})
            wanted = (
                item.device
                if item.device
                else ("an NVIDIA GPU" if item.gpus else "a node without accelerators")
            )
            return base.model_copy(
                update={
                    "resource": item.device or (UNTYPED_GPU if item.gpus else None),
                    "message": f"cluster {cluster}: {what}: no node pool has {wanted}"
                    f" (offers {', '.join(offered) or 'no accelerators'})",
                }
            )
        labelled = _labelled(item, matching)
        if not labelled:
            selector = ", ".join(f"{k}={v}" for k, v in sorted(item.selector.items()))
            labels = "; ".join(
                f"{p.name} {{{', '.join(f'{k}={v}' for k, v in sorted(p.labels.items()))}}}"
                for p in matching
            )
            return base.model_copy(
                update={
                    "kind": ReasonKind.SELECTOR,
                    "resource": selector,
                    "message": f"cluster {cluster}: {what}: node selector {selector} matches no"
                    f" pool's labels (pools with its kind of node: {labels})",
                }
            )
        capped = {str(p.device): cap for p in labelled if (cap := self.capped(item, p)) is not None}
        uncapped = [p for p in labelled if p.device not in capped]
        caps = ", ".join(f"{device} at {cap}" for device, cap in sorted(capped.items()))
        if not uncapped:
            return base.model_copy(
                update={
                    "kind": ReasonKind.DEVICE_CAP,
                    "resource": min(capped),
                    "requested": item.gpus,
                    "limit": max(capped.values()),
                    "message": f"cluster {cluster}: {what}: queue {self.queue.name} caps every"
                    f" GPU type here below that ({caps})",
                }
            )
        d, pool = _largest_short(item, uncapped)
        over = [
            _over(problem, o, int(item.request[o]), int(pool.room[o]))
            for o in range(len(problem.dims))
            if item.request[o] > pool.room[o]
        ]
        others = f"; queue {self.queue.name} caps the other GPU types below it ({caps})"
        return base.model_copy(
            update={
                "kind": ReasonKind.LARGER_THAN_NODE,
                "node_pool": pool.name,
                "resource": problem.dims[d],
                "requested": int(item.request[d]),
                "limit": int(pool.room[d]),
                "message": f"cluster {cluster}: {what} is larger than any node (closest: pool"
                f" {pool.name}, {', '.join(over)})" + (others if caps else ""),
            }
        )


def _fits(item: Item, pool: PoolInfo) -> bool:
    return bool((item.request <= pool.room).all())


def _largest_short(item: Item, pools: list[PoolInfo]) -> tuple[int, PoolInfo]:
    """The pool the container misses by the fewest dimensions (then by the least), and the
    dimension it misses that pool by the most."""

    def misses(pool: PoolInfo) -> tuple[int, float]:
        over = item.request > pool.room
        ratio = float((item.request[over] / np.maximum(pool.room[over], 1)).sum())
        return int(over.sum()), ratio

    pool = min(pools, key=misses)
    over = np.flatnonzero(item.request > pool.room)
    d = int(max(over, key=lambda o: item.request[o] / max(pool.room[o], 1)))
    return d, pool


class _Fixes:
    """Candidate fixes, each checked with fail-fast on the changed action before it is kept."""

    def __init__(
        self,
        solo: Snapshot,
        problem: Problem,
        reasons: _Reasons,
        action: Action,
        replayer: Replayer,
    ) -> None:
        self.solo = solo
        self.problem = problem
        self.reasons = reasons
        self.action = action
        self.queue = reasons.queue
        self.replayer = replayer
        self.unproven: list[Suggestion] = []
        self.ruled_out: list[str] = []

    def _feasible(self, changes: list[Change]) -> bool:
        changed = apply_changes(self.solo, self.action.id, changes)
        action = next(a for a in changed.actions if a.id == self.action.id)
        return failure_alone(changed, action) is None

    def suggestions(self) -> list[Suggestion]:
        caps = self.reasons.caps()
        raise_caps = [
            (
                Change(kind=ChangeKind.RAISE_CAP, queue=self.queue.name, resource=r.resource,
                       value=r.requested),
                f"raise {cap_setting(r.resource)} of queue {self.queue.name} to"
                f" {cap_amount(r.resource, r.requested)}",
            )
            for r in caps
        ]  # fmt: skip
        reduce_caps = [change for r in caps for change in self._reduce_for_cap(r)]
        candidates: list[list[tuple[Change, str]]] = []
        # A change to the request can settle a cap and a cluster at once, so the queue part
        # may be empty even when a cap is exceeded; the check below sorts that out.
        for queue_part in _distinct([[], raise_caps, reduce_caps]):
            if not self.reasons.refused:
                candidates.append(queue_part)
            for settings in (False, True):
                for c in self.reasons.refused:
                    fix = self._cluster_fix(c, settings, queue_part)
                    if fix is not None:
                        candidates.append(queue_part + fix)
        candidates += [[route] for route in self._routes()]
        found: list[Suggestion] = []
        seen: set[str] = set()
        for candidate in sorted((c for c in candidates if c), key=len):
            message = "; ".join(words for _, words in candidate)
            if message in seen:
                continue
            seen.add(message)
            changes = [change for change, _ in candidate]
            if not self._feasible(changes):
                continue
            replayed = self.replayer.prove(changes)
            if replayed is None or not replayed.finished:
                self.unproven.append(
                    Suggestion(
                        changes=changes,
                        message=f"{message}: it would be feasible, but the tick re-run with it"
                        " did not finish within the explanation's budget",
                    )
                )
            elif replayed.failed:
                continue
            elif replayed.displaced:
                # The proof stops there: what the tick then does with the action is not known.
                self.ruled_out.append(
                    f"{message}: it would be feasible, but the tick re-run with it leaves out"
                    f" {listed(replayed.displaced)} (scheduled now)"
                )
            else:
                found.append(self._proven(changes, message, replayed))
            if len(found) == MOST_SUGGESTIONS:
                break
        return found

    def _proven(self, changes: list[Change], message: str, replayed: Replayed) -> Suggestion:
        if replayed.runs:
            then = f"then {who_runs(self.action.id, replayed)}"
        else:
            then = "then it can run; the tick re-run with it keeps it waiting for now"
            then += f": {replayed.message}" if replayed.message else ""
        return Suggestion(changes=changes, message=f"{message}: {then}", also_runs=replayed.let_in)

    def _routes(self) -> list[tuple[Change, str]]:
        """Other queues that could run the action as it is: one copy per queue, judged by
        fail-fast in one go."""
        if self.action.environment is not None:
            return []  # an environment belongs to its queue
        others = [q.name for q in self.solo.queues if q.name != self.action.queue]
        copies = [
            self.action.model_copy(update={"id": f"{self.action.id}@{name}", "queue": name})
            for name in others
        ]
        problem = compile_snapshot(self.solo.model_copy(update={"actions": copies}))
        failures = fail_fast(problem)
        able = {problem.queues[a.queue].name for a in problem.actions if a.index not in failures}
        return [
            (
                Change(kind=ChangeKind.ROUTE_TO_QUEUE, value=name),
                f"submit it to queue {name}, which can run it",
            )
            for name in others
            if name in able
        ][:MOST_ROUTES]

    def _reduce_for_cap(self, reason: Reason) -> list[tuple[Change, str]]:
        """Take the excess off the largest requests of the capped resource."""
        resource = reason.resource or ""
        excess = (reason.requested or 0) - (reason.limit or 0)
        holders = []
        for item in self.reasons.items:
            if resource == UNTYPED_GPU:
                amount = item.gpus if item.untyped else 0
            elif "/" in resource:
                amount = item.gpus if item.device == resource else 0
            else:
                amount = self._container_amount(item, resource)
            if amount:
                holders.append((amount, item.name))
        dim = UNTYPED_GPU if resource == UNTYPED_GPU or "/" in resource else resource
        if self.action.environment is not None and holders:
            # Every replica asks the same: a change to one is a change to all of them.
            amount, name = holders[0]
            cut = amount - (reason.limit or 0) // len(holders)
            holders, excess = [(amount, name)], cut
        changes = []
        for amount, name in sorted(holders, reverse=True):
            if excess <= 0:
                break
            cut = min(excess, amount)
            if cut == amount:
                return []  # dropping the request altogether is no fix anyone asked for
            excess -= cut
            changes.append(
                (
                    Change(kind=ChangeKind.REDUCE_REQUEST, container=name, resource=dim,
                           value=amount - cut),
                    f"reduce {_request_name(dim)} of container {name} from"
                    f" {cap_amount(dim, amount)} to {cap_amount(dim, amount - cut)}",
                )
            )  # fmt: skip
        return changes

    def _container_amount(self, item: Item, resource: str) -> int:
        containers = self.action.containers
        if self.action.environment is not None:
            env = next(e for e in self.solo.environments if e.name == self.action.environment)
            containers = env.replica_containers()
        for container in containers:
            if container.name == item.name:
                return container.resources.get(resource, 0)
        return 0

    def _cluster_fix(
        self, c: int, settings: bool, base: list[tuple[Change, str]]
    ) -> list[tuple[Change, str]] | None:
        """Changes that, after `base`, let cluster `c` run the action; None if none is known.

        Found a round at a time: a container made to fit a node can still leave a total
        larger than the cluster. With `settings`, the fix changes the fleet and the queue (a
        node pool copied from elsewhere, a device cap raised); otherwise the request.
        """
        changes: list[tuple[Change, str]] = []
        for _ in range(FIX_ROUNDS):
            done = [change for change, _ in base + changes]
            problem = compile_snapshot(apply_changes(self.solo, self.action.id, done))
            reasons = _Reasons(problem, problem.actions[0])
            refused = reasons.cluster(c)
            if not refused:
                return changes
            step = _ClusterStep(problem, reasons, c).changes(refused, settings)
            if not step:
                return None
            changes += step
        return None


class _ClusterStep:
    """One round of fixes for the reasons one cluster refuses the action."""

    def __init__(self, problem: Problem, reasons: _Reasons, c: int) -> None:
        self.problem = problem
        self.reasons = reasons
        self.c = c
        self.cluster = problem.cluster_names[c]
        self.pools = [problem.pools[p] for p in problem.pools_of_cluster[c]]

    def changes(self, refused: list[Reason], settings: bool) -> list[tuple[Change, str]]:
        changes: list[tuple[Change, str]] = []
        for reason in refused:
            item = next((i for i in self.reasons.items if i.name == reason.container), None)
            if reason.kind is ReasonKind.LARGER_THAN_CLUSTER:
                fix = self._grow()
            elif reason.kind is ReasonKind.DEVICE_CAP and item is None:
                fix = self._raise_shared_cap(reason)
            elif item is None:
                fix = []
            else:
                sides = (self._settings_side, self._request_side)
                first, second = sides if settings else sides[::-1]
                fix = first(reason, item) or second(reason, item)
            if not fix:
                return []
            # Containers of one kind (an environment's replicas) ask for the same copy: made
            # once, a later round grows it if they need more of it than one node.
            changes += [change for change in fix if change not in changes]
        return changes

    def _settings_side(self, reason: Reason, item: Item) -> list[tuple[Change, str]]:
        """Raise a device cap that keeps untyped GPUs off a pool, or copy a pool that fits."""
        if reason.kind in (ReasonKind.DEVICE_CAP, ReasonKind.LARGER_THAN_NODE):
            raised = self._raise_device_cap(item)
            if raised:
                return raised
        # A pool of the container's kind without the labels it selects is still worth copying
        # when the kind is what the cluster lacks: the next round changes the selector. A
        # container larger than every node of its kind here gains only from a copy that
        # holds it; where none does, the request is what must change (`_request_side`).
        larger = reason.kind is ReasonKind.LARGER_THAN_NODE
        return self._add_pool(item, unlabelled=reason.kind is not ReasonKind.SELECTOR, fits=larger)

    def _request_side(self, reason: Reason, item: Item) -> list[tuple[Change, str]]:
        match reason.kind:
            case ReasonKind.DEVICE_CAP:
                return self._fewer_gpus(item)
            case ReasonKind.NO_ACCELERATOR:
                return self._other_device(item)
            case ReasonKind.SELECTOR:
                return self._selector(item, _matching(item, self.pools))
            case ReasonKind.LARGER_THAN_NODE:
                pools = _labelled(item, _matching(item, self.pools))
                return self._shrink(
                    item, [p for p in pools if self.reasons.capped(item, p) is None]
                )
        return []

    def _raise_device_cap(self, item: Item) -> list[tuple[Change, str]]:
        """Raise the cap of a device type here (one the container fits, if any)."""
        pools = [
            p
            for p in _labelled(item, _matching(item, self.pools))
            if self.reasons.capped(item, p) is not None
        ]
        if not pools:
            return []
        device = min(pools, key=lambda p: (not _fits(item, p), p.device)).device
        queue = self.reasons.queue.name
        return [
            (
                Change(kind=ChangeKind.RAISE_CAP, queue=queue, resource=device, value=item.gpus),
                f"raise max_accelerators {device} of queue {queue} to {item.gpus}",
            )
        ]

    def _raise_shared_cap(self, reason: Reason) -> list[tuple[Change, str]]:
        """Raise the cap of the type the untyped containers share to what they need together."""
        queue, device, value = self.reasons.queue.name, reason.resource, reason.requested
        return [
            (
                Change(kind=ChangeKind.RAISE_CAP, queue=queue, resource=device, value=value),
                f"raise max_accelerators {device} of queue {queue} to {value}",
            )
        ]

    def _fewer_gpus(self, item: Item) -> list[tuple[Change, str]]:
        """Ask for no more untyped GPUs than the highest device cap here allows."""
        caps = [self.reasons.capped(item, p) for p in _labelled(item, _matching(item, self.pools))]
        most = max((cap for cap in caps if cap is not None), default=0)
        if not most:
            return []
        return [
            (
                Change(kind=ChangeKind.REDUCE_REQUEST, container=item.name, resource=UNTYPED_GPU,
                       value=most),
                f"reduce the GPU count of container {item.name} from {item.gpus} to {most}",
            )
        ]  # fmt: skip

    def _add_pool(
        self, item: Item, unlabelled: bool = False, fits: bool = False
    ) -> list[tuple[Change, str]]:
        """Copy a node pool of the fleet with the container's kind of node and labels (or,
        `unlabelled`, with its kind of node alone when no pool has both); with `fits`, only
        one whose node holds the container."""
        kind = [
            p
            for p in _matching(item, self.problem.pools)
            if self.reasons.capped(item, p) is None and (not fits or _fits(item, p))
        ]
        donors = _labelled(item, kind) or (kind if unlabelled else [])
        if not donors:
            return []
        # One that fits, the smallest; else the largest (a later round reduces the request).
        donor = min(
            donors,
            key=lambda p: (
                not _fits(item, p),
                tuple(np.minimum(p.room, UNBOUNDED) * (1 if _fits(item, p) else -1)),
                self.problem.cluster_names[p.cluster],
                p.name,
            ),
        )
        taken = {p.name for p in self.pools}
        name = donor.name
        suffix = 2
        while name in taken:
            name, suffix = f"{donor.name}-{suffix}", suffix + 1
        like = f"{self.problem.cluster_names[donor.cluster]}/{donor.name}"
        return [
            (
                Change(kind=ChangeKind.ADD_POOL, cluster=self.cluster, node_pool=name, like=like,
                       value=1),
                f"add a node pool {name} like pool {like} to cluster {self.cluster}",
            )
        ]  # fmt: skip

    def _other_device(self, item: Item) -> list[tuple[Change, str]]:
        if not item.gpus:
            return []
        offered = [p for p in _labelled(item, self.pools) if p.device]
        if not offered:
            return []
        device = min(offered, key=lambda p: (not _fits(item, p), p.device)).device
        return [
            (
                Change(kind=ChangeKind.CHANGE_DEVICE, container=item.name, value=device),
                f"ask for {device} instead in container {item.name}",
            )
        ]

    def _selector(self, item: Item, pools: list[PoolInfo]) -> list[tuple[Change, str]]:
        fitting = [p for p in pools if (item.request <= p.room).all()] or pools
        pool = min(
            fitting,
            key=lambda p: (sum(p.labels.get(k) != v for k, v in item.selector.items()), p.name),
        )
        changes = []
        for key, value in sorted(item.selector.items()):
            label = pool.labels.get(key)
            if label == value:
                continue
            words = (
                f"set node selector {key}={label} in container {item.name}"
                if label is not None
                else f"drop node selector {key}={value} from container {item.name}"
            )
            changes.append(
                (
                    Change(kind=ChangeKind.CHANGE_SELECTOR, container=item.name, resource=key,
                           value=label),
                    f"{words} (pool {pool.name})",
                )
            )  # fmt: skip
        return changes

    def _shrink(self, item: Item, pools: list[PoolInfo]) -> list[tuple[Change, str]]:
        if not pools:
            return []
        _, pool = _largest_short(item, pools)
        changes = []
        for d in np.flatnonzero(item.request > pool.room):
            dim = UNTYPED_GPU if d == GPU_DIM else self.problem.dims[d]
            value = int(pool.room[d])
            changes.append(
                (
                    Change(kind=ChangeKind.REDUCE_REQUEST, container=item.name, resource=dim,
                           value=value),
                    f"reduce {_request_name(dim)} of container {item.name} from"
                    f" {cap_amount(dim, int(item.request[d]))} to {cap_amount(dim, value)}"
                    f" (a node of pool {pool.name})",
                )
            )  # fmt: skip
        return changes

    def _grow(self) -> list[tuple[Change, str]]:
        """Add nodes to the pool that covers the shortfall with the fewest new nodes (of the
        pools the containers short of room are confined to)."""
        problem, c = self.problem, self.c
        lacking = short_of_room(problem, c, self.reasons.items)
        if lacking is None:
            return []
        usable, total, capacity = lacking.pools, lacking.total, lacking.capacity
        short = np.maximum(total - capacity, 0)
        best: tuple[int, PoolInfo] | None = None
        for p in usable:
            pool = problem.pools[p]
            needs = [
                math.ceil(short[d] / pool.room[d]) if pool.room[d] else math.inf
                for d in np.flatnonzero(short)
            ]
            count = max(needs) if needs else 0
            if count != math.inf and (best is None or count < best[0]):
                best = (int(count), pool)
        if best is None:
            return []
        count, pool = best
        return [
            (
                Change(kind=ChangeKind.ADD_NODES, cluster=self.cluster, node_pool=pool.name,
                       value=pool.max_nodes + count, amount=count),
                f"raise max_nodes of pool {pool.name} in cluster {self.cluster} from"
                f" {pool.max_nodes} to {pool.max_nodes + count}",
            )
        ]  # fmt: skip


def _distinct(parts: list[list[tuple[Change, str]]]) -> list[list[tuple[Change, str]]]:
    """Each queue part once (no cap exceeded: all of them are empty)."""
    seen: list[list[tuple[Change, str]]] = []
    for part in parts:
        if part not in seen:
            seen.append(part)
    return seen


def _request_name(dim: str) -> str:
    return "the GPU count" if dim == UNTYPED_GPU else f"the {dim} request"
