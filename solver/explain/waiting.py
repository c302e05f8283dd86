"""Why a pending action waits: the explanation model's minimal core as sentences with numbers,
and its cheapest fix as suggestions."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from models.explanation import (
    Change,
    ChangeKind,
    Explanation,
    ExplanationState,
    Reason,
    ReasonKind,
)
from models.quantity import format_quantity
from models.resources import UNTYPED_GPU
from models.result import ScheduledAction, TickResult, WaitReason
from models.snapshot import Action, ActionState, Scheduling, Snapshot
from solver.explain.changes import FINISH_ACTIONS, FINISH_RUNS, charges
from solver.explain.core_model import Assumption, ExplainModel, Fix, Limit
from solver.explain.frozen import as_running, freeze
from solver.explain.replay import Proofs, Replayed, Replayer
from solver.placement.problem import GPU_DIM, UNBOUNDED, Item, PoolInfo

# The most nodes a room fix adds beyond the model's, when earlier actions come in first.
MOST_EXTRA_NODES = 16
MOST_NAMED = 5  # actions named in a wait, before "and N more"

Admitted = list[tuple[Action, ScheduledAction]]


def explain_waiting(
    snapshot: Snapshot, action_id: str, result: TickResult, replayer: Replayer
) -> Explanation:
    """`replayer` proves the suggestions: it re-runs the tick of `result`."""
    # The worlds of one tick's explanations share its fleet and most of its running work.
    worlds = replayer.state.worlds if replayer.state is not None else None
    frozen = freeze(snapshot, action_id, result, worlds, replayer.position(), replayer.view())
    model = ExplainModel(frozen)
    words = _Words(model, result)
    waiting = replayer.decided.waiting.get(action_id)
    code = waiting.reason.value if waiting is not None else "queued"
    queue = frozen.line.queue.name

    def for_one_reason(item: Reason) -> Explanation:
        """A wait with no change to suggest: its one reason."""
        return Explanation(
            action=action_id,
            queue=queue,
            state=ExplanationState.WAITING,
            code=code,
            message=f"{action_id} waits in queue {queue}: {item.message}",
            items=[item],
            as_of=snapshot.now,
            model_solves=model.solves,
        )

    if model.items and not model.clusters:
        # Fail-fast lets an action wait when no fleet is described: nothing to place it on.
        return for_one_reason(
            Reason(
                kind=ReasonKind.NO_CLUSTER,
                queue=queue,
                message="no cluster is described yet, so its placement cannot be judged",
            )
        )
    core = model.minimal_core()
    if core is None:
        # Past its time limit the tick leaves the rest to best-fit, which can miss a placement.
        limited = result.solver.cut_short or (
            waiting is not None and waiting.reason is WaitReason.SOLVER_LIMIT
        )
        return for_one_reason(
            words.unconstrained(ReasonKind.SOLVER_LIMIT if limited else ReasonKind.FITS_NOW)
        )
    items = [words.reason(a) for a in core]
    fix = model.cheapest_fix()
    proofs = Proofs(replayer)
    ladders = _Ladders(snapshot, proofs.replayer, frozen.line.admitted)
    settings = words.settings_changes(fix)
    if settings:
        proofs.offer([ladders.of(c) for c in settings], _settings_words, ladders.guess)
    wait = words.wait_changes(fix)
    if wait is not None:
        proofs.offer([ladders.of(c) for c in wait], ladders.wait_words)
    more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
    return Explanation(
        action=action_id,
        queue=queue,
        state=ExplanationState.WAITING,
        code=code,
        message=f"{action_id} waits in queue {queue}: {items[0].message}{more}",
        items=items,
        suggestions=proofs.suggestions,
        unproven=proofs.unproven,
        ruled_out=proofs.ruled_out,
        replays=proofs.replayer.replays,
        as_of=snapshot.now,
        minimal=model.minimal,
        model_solves=model.solves,
    )


def amount_text(dim: str, amount: int, pool: PoolInfo | None = None) -> str:
    """`40 cpu`, `64Gi memory`, `8 GPUs` (or `4 google_tpu/google-tpu-v6e`)."""
    if dim == UNTYPED_GPU:
        if pool is None or pool.nvidia:
            return counted(amount, "GPU")
        return f"{amount} {pool.device}"
    return f"{format_quantity(dim, amount)} {dim}"


def counted(count: int, noun: str) -> str:
    """`1 node`, `3 nodes`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def cap_setting(resource: str | None) -> str:
    """The queue setting that caps `resource`: `max_gpus`, `max_accelerators <device>`, ..."""
    if resource == UNTYPED_GPU:
        return "max_gpus"
    if resource and "/" in resource:
        return f"max_accelerators {resource}"
    return f"max_resources {resource}"


def cap_amount(resource: str | None, amount: int | None) -> str:
    """A cap's value as the setting is written: a count, or a quantity (`64Gi`)."""
    if resource is None or resource == UNTYPED_GPU or "/" in resource:
        return str(amount)
    return format_quantity(resource, amount or 0)


def clock(moment: datetime, now: datetime) -> str:
    """`10:02` on the day of `now`, the date too otherwise (UTC)."""
    if moment.date() == now.date():
        return moment.strftime("%H:%M")
    return moment.strftime("%Y-%m-%d %H:%M")


class _Words:
    """Sentences and changes for one model's limits."""

    def __init__(self, model: ExplainModel, result: TickResult) -> None:
        self.model = model
        self.result = result
        self.frozen = model.frozen
        self.problem = model.problem
        self.queue = model.queue
        self.usage = model.usage
        self.name = model.queue.name

    # -- reasons ---------------------------------------------------------------------------

    def unconstrained(self, kind: ReasonKind) -> Reason:
        if kind is ReasonKind.SOLVER_LIMIT:
            message = (
                "no limit keeps it out on the fleet as the tick left it; the tick's time limit"
                " ran out before its model could place it, so best-fit had the last word"
            )
        else:
            message = (
                "no limit keeps it out on the fleet as the tick left it; the next tick can"
                " schedule it"
            )
        return Reason(kind=kind, message=message, queue=self.name)

    def reason(self, assumption: Assumption) -> Reason:
        limit = assumption.limit
        if limit is Limit.ROOM:
            return self._room(int(assumption.subject))  # type: ignore[arg-type]
        return {
            Limit.DEPTH: self._depth,
            Limit.HEAD: self._head,
            Limit.RUN: self._run,
            Limit.ACTION: self._action,
            Limit.CAP: self._cap,
            Limit.DEVICE: self._device,
            Limit.UNTYPED: self._untyped,
        }[limit](assumption)

    def _depth(self, _: Assumption) -> Reason:
        queued = self.model.seen_ahead() - self.queue.running + self.frozen.line.dropped
        depth = self.frozen.line.queue.depth or 0
        return Reason(
            kind=ReasonKind.DEPTH,
            queue=self.name,
            used=self.queue.running + queued,
            limit=depth,
            message=f"queue {self.name} holds at most {depth} actions:"
            f" {self.queue.running} in flight and {queued} queued ahead of it",
        )

    def _head(self, _: Assumption) -> Reason:
        head = self.frozen.line.head
        assert head is not None
        metrics = self.result.queues.get(self.name)
        since = metrics.head_blocked_since if metrics else None
        behind = metrics.blocked_behind_head if metrics else None
        parts = [f"behind {head.id} at the head of strict_fifo queue {self.name}"]
        if since is not None:
            parts.append(f"blocked since {clock(since, self.problem.now)}")
        if behind is not None:
            parts.append(f"{behind} waiting behind it")
        message = ", ".join(parts)
        own = next((w for w in self.result.waiting if w.action == head.id), None)
        if own is not None and own.message:
            message += f" ({head.id} itself waits: {own.message})"
        return Reason(
            kind=ReasonKind.HEAD_OF_LINE,
            queue=self.name,
            head=head.id,
            since=since,
            behind=behind,
            message=message,
        )

    def _run(self, _: Assumption) -> Reason:
        runs, limit = len(self.usage.runs), self.queue.run_concurrency or 0
        run = self.frozen.action.run
        message = f"run concurrency {runs} of {limit}; its run {run} is not active yet"
        return self._slot_reason(ReasonKind.RUN_CONCURRENCY, runs, limit, message)

    def _action(self, _: Assumption) -> Reason:
        in_flight, limit = self.model.in_flight(), self.queue.action_concurrency or 0
        message = f"action concurrency {in_flight} of {limit}"
        return self._slot_reason(ReasonKind.ACTION_CONCURRENCY, in_flight, limit, message)

    def _slot_reason(self, kind: ReasonKind, used: int, limit: int, message: str) -> Reason:
        """A concurrency limit: admitting the action takes one more slot of it."""
        return Reason(
            kind=kind, queue=self.name, used=used, limit=limit, requested=1, message=message
        )

    def _cap(self, assumption: Assumption) -> Reason:
        name = str(assumption.subject)
        used, cap = self.usage.held.amount(name), self.queue.caps[name]
        need = self.model.charge[name]
        return Reason(
            kind=ReasonKind.QUEUE_CAP,
            queue=self.name,
            resource=name,
            used=used,
            limit=cap,
            requested=need,
            message=f"queue {self.name}, {name}: {format_quantity(name, used)} of"
            f" {format_quantity(name, cap)} in use, needs {format_quantity(name, need)}",
        )

    def _device(self, assumption: Assumption) -> Reason:
        device = str(assumption.subject)
        used = self.usage.held.amount(device)
        cap = self.queue.caps[device]
        typed = self.model.charge.amount(device)
        landing = {s.item: self.model.items[s.item] for s in self.model.device_landing(device)}
        need = typed + sum(item.gpus for item in landing.values())
        message = f"queue {self.name}, {device}: {used} of {cap} in use, needs {need}"
        if landing:
            names = ", ".join(item.name for item in landing.values())
            message += f" where untyped container {names} lands on {device.split('/')[-1]} nodes"
        return Reason(
            kind=ReasonKind.DEVICE_CAP,
            queue=self.name,
            resource=device,
            used=used,
            limit=cap,
            requested=need,
            message=message,
        )

    def _untyped(self, _: Assumption) -> Reason:
        used, cap = self.usage.held.amount(UNTYPED_GPU), self.queue.caps.get(UNTYPED_GPU, 0)
        need = self.model.charge.amount(UNTYPED_GPU)
        return Reason(
            kind=ReasonKind.UNTYPED_GPU_CAP,
            queue=self.name,
            resource=UNTYPED_GPU,
            used=used,
            limit=cap,
            requested=need,
            message=f"queue {self.name}, untyped GPUs: {used} of {cap} in use, needs {need}",
        )

    def _room(self, p: int) -> Reason:
        problem, plan = self.problem, self.frozen.plan
        pool = problem.pools[p]
        cluster = problem.cluster_names[pool.cluster]
        items = [item for item in self.model.items if p in item.pools.get(pool.cluster, ())]
        bounded = pool.room < UNBOUNDED
        free = np.where(bounded, np.maximum(plan.free[p], 0), 0)
        where = f"cluster {cluster}, pool {pool.name}"
        higher, held = self._higher_priority(p)
        story = ReasonKind.CLUSTER_ROOM
        if higher and _may_fit(items, free + held, bounded):
            story = ReasonKind.LOWER_PRIORITY
        d, item = _binding(items, free, bounded)
        total, largest = int(free[:, d].sum()), int(free[:, d].max())
        need = int(item.request[d])
        together = int(sum(i.request[d] for i in items))
        numbers = Reason(
            kind=story,
            message="",
            queue=self.name,
            cluster=cluster,
            node_pool=pool.name,
            container=item.name,
            resource=problem.dims[d],
            requested=need,
            free=total,
            largest_free=largest,
            queues=higher if story is ReasonKind.LOWER_PRIORITY else [],
        )
        names = ", ".join(i.name for i in items)
        if story is ReasonKind.LOWER_PRIORITY:
            room = int((free + held)[:, d].max())
            message = (
                f"{where}: room went to higher-priority queues {', '.join(higher)} this tick"
                f" ({self._amount(d, int(held[:, d].sum()), pool)} of it); without their work"
                f" {self._amount(d, room, pool)} would be free on one node, container"
                f" {item.name} needs {self._amount(d, need, pool)}"
            )
        elif need > largest and total >= together:
            story = ReasonKind.NODE_FIT
            message = (
                f"{where}: {self._amount(d, total, pool)} free but at most"
                f" {self._bare(d, largest)} on one node, container {item.name} needs"
                f" {self._bare(d, need)} on one node"
            )
        elif need > largest or together > total:
            asked = (
                f"container {item.name} needs {self._amount(d, need, pool)}"
                if len(items) == 1 or need > largest
                else f"containers {names} need {self._amount(d, together, pool)} together"
            )
            message = (
                f"{where}: {self._amount(d, total, pool)} free at full scale"
                f" ({counted(pool.max_nodes, 'node')}), {asked}"
            )
        else:
            story = ReasonKind.NODE_FIT
            message = (
                f"{where}: containers {names} do not fit the room left on its nodes together"
                f" ({self._amount(d, total, pool)} free, at most"
                f" {self._amount(d, largest, pool)} on one node)"
            )
        return numbers.model_copy(update={"kind": story, "message": message})

    def _bare(self, d: int, amount: int) -> str:
        """An amount after the first of a sentence, which named the unit."""
        return str(amount) if d == GPU_DIM else format_quantity(self.problem.dims[d], amount)

    def _amount(self, d: int, amount: int, pool: PoolInfo) -> str:
        dim = self.problem.dims[d]
        return amount_text(UNTYPED_GPU if d == GPU_DIM else dim, amount, pool)

    def _higher_priority(self, p: int) -> tuple[list[str], np.ndarray]:
        """Queues of higher priority that placed work on pool `p` this tick, and its room."""
        plan = self.frozen.plan
        pool = self.problem.pools[p]
        held = np.zeros_like(plan.free[p])
        names: set[str] = set()
        for key in plan.pool_units.get(p, ()):
            queue, items, placement = plan.unit(key)
            other = self.problem.queues[queue]
            if other.priority <= self.queue.priority:
                continue
            for item, (spot_pool, node) in zip(items, placement.spots, strict=True):
                if spot_pool == p:
                    held[node] += np.where(pool.room < UNBOUNDED, item.request, 0)
                    names.add(other.name)
        return sorted(names), held

    # -- suggestions -----------------------------------------------------------------------

    def _landing(self, fix: Fix, device: str) -> int:
        return sum(
            self.model.items[s.item].gpus
            for s in fix.spots
            if self.model.items[s.item].untyped and self.problem.pools[s.pool].device == device
        )

    def _needed(self, assumption: Assumption, fix: Fix) -> tuple[int, int]:
        """(what the limit must be at least, what it is) for a relaxed cap or limit."""
        model, usage, queue = self.model, self.usage, self.queue
        subject = str(assumption.subject)
        match assumption.limit:
            case Limit.DEPTH:
                seen = model.seen_ahead() + self.frozen.line.dropped
                return seen + 1, self.frozen.line.queue.depth or 0
            case Limit.RUN:
                return len(usage.runs) + 1, queue.run_concurrency or 0
            case Limit.ACTION:
                return model.in_flight() + 1, queue.action_concurrency or 0
            case Limit.CAP | Limit.UNTYPED | Limit.DEVICE:
                used = usage.held.amount(subject) + model.charge.amount(subject)
                if assumption.limit is Limit.DEVICE:
                    used += self._landing(fix, subject)
                return used, queue.caps[subject]
        raise ValueError(assumption.limit)

    def settings_changes(self, fix: Fix) -> list[Change]:
        """Raise what must be raised, switch the policy, add nodes: the model's fix."""
        changes: list[Change] = []
        q = self.name
        for assumption in fix.relaxed:
            limit = assumption.limit
            if limit is Limit.HEAD:
                changes.append(
                    Change(
                        kind=ChangeKind.SWITCH_POLICY,
                        queue=q,
                        value=Scheduling.GREEDY_CAPACITY.value,
                    )
                )
            elif limit is Limit.ROOM:
                p = int(assumption.subject)  # type: ignore[arg-type]
                pool = self.problem.pools[p]
                extra = fix.extra_nodes.get(p, 0)
                if not extra:
                    continue
                changes.append(
                    Change(
                        kind=ChangeKind.ADD_NODES,
                        cluster=self.problem.cluster_names[pool.cluster],
                        node_pool=pool.name,
                        value=pool.max_nodes + extra,
                        amount=extra,
                    )
                )
            elif limit in (Limit.DEPTH, Limit.RUN, Limit.ACTION):
                needed, current = self._needed(assumption, fix)
                setting = {
                    Limit.DEPTH: "depth",
                    Limit.RUN: "run_concurrency",
                    Limit.ACTION: "action_concurrency",
                }[limit]
                changes.append(
                    Change(
                        kind=ChangeKind.RAISE_LIMIT,
                        queue=q,
                        resource=setting,
                        value=needed,
                        amount=needed - current,
                    )
                )
            else:
                needed, _ = self._needed(assumption, fix)
                resource = str(assumption.subject)
                changes.append(
                    Change(kind=ChangeKind.RAISE_CAP, queue=q, resource=resource, value=needed)
                )
        return changes

    def wait_changes(self, fix: Fix) -> list[Change] | None:
        """How much of the queue's work must finish, when only its caps and limits stand in
        the way."""
        waitable = (Limit.RUN, Limit.ACTION, Limit.CAP, Limit.DEVICE, Limit.UNTYPED)
        if not fix.relaxed or any(a.limit not in waitable for a in fix.relaxed):
            return None
        changes: list[Change] = []
        for assumption in fix.relaxed:
            needed, current = self._needed(assumption, fix)
            amount = needed - current
            if assumption.limit is Limit.RUN:
                resource, held = FINISH_RUNS, len(self.usage.runs)
            elif assumption.limit is Limit.ACTION:
                resource, held = FINISH_ACTIONS, self.model.in_flight()
            else:
                resource = str(assumption.subject)
                held = self._held(assumption)
            if amount > held:
                return None  # even if all of it finished, the limit would still say no
            changes.append(
                Change(
                    kind=ChangeKind.WAIT_FOR_FINISH, queue=self.name, resource=resource,
                    amount=amount,
                )
            )  # fmt: skip
        return changes

    def _held(self, assumption: Assumption) -> int:
        """What the queue's actions hold of a capped resource: all that can finish (a
        running environment's pool keeps its charge while it lives)."""
        frozen = self.frozen
        actions = [
            a for a in frozen.world.actions if a.queue == self.name and a.state.value == "running"
        ]
        actions += [as_running(a, d) for a, d in frozen.line.admitted if a.queue == self.name]
        return sum(c.amount(str(assumption.subject)) for c in charges(frozen.world, actions))


def _settings_words(changes: list[Change]) -> str:
    return _sentence([change_words(change) for change in changes])


def change_words(change: Change) -> str:
    """A settings change as the admin would make it."""
    q, value, amount = change.queue, change.value, change.amount or 0
    match change.kind:
        case ChangeKind.SWITCH_POLICY:
            return f"switch queue {q} to {value}"
        case ChangeKind.ADD_NODES:
            return (
                f"raise max_nodes of pool {change.node_pool} in cluster {change.cluster}"
                f" from {int(value or 0) - amount} to {value}"
            )
        case ChangeKind.RAISE_LIMIT:
            return (
                f"raise {change.resource} of queue {q} from {int(value or 0) - amount} to {value}"
            )
        case ChangeKind.RAISE_CAP:
            resource = change.resource
            return f"raise {cap_setting(resource)} of queue {q} to {cap_amount(resource, value)}"  # type: ignore[arg-type]
    raise ValueError(change.kind)


class _Ladders:
    """Each change of a fix in versions from the model's up to one that lets in every
    earlier action the change could, for `solver.explain.replay.smallest` to climb."""

    def __init__(self, snapshot: Snapshot, replayer: Replayer, admitted: Admitted) -> None:
        self.snapshot = snapshot
        self.ahead = replayer.refused_ahead()
        self.admitted = admitted
        self.action_id = replayer.action_id

    def guess(self, fix: list[Change], walked: Replayed) -> list[Change] | None:
        """`fix` with each cap and concurrency limit raised by what `walked` let in
        ahead of the action takes of it (for `solver.explain.replay.smallest`); None when a
        change is not such a count (nodes, finished work)."""
        let_in = set(walked.let_in)
        came = [a for a in self.ahead if a.id in let_in]
        guessed: list[Change] = []
        for change in fix:
            more = self._more(change, [a for a in came if a.queue == change.queue])
            if more is None:
                if change.kind is not ChangeKind.SWITCH_POLICY:
                    return None
                guessed.append(change)
            elif change.kind is ChangeKind.RAISE_CAP:
                guessed.append(change.model_copy(update={"value": int(change.value or 0) + more}))
            else:
                guessed.append(_raised(change, more))
        return guessed

    def _more(self, change: Change, came: list[Action]) -> int | None:
        """How much more of a cap or concurrency limit than the model's fix `came` take."""
        if change.kind is ChangeKind.RAISE_CAP:
            return sum(c.amount(change.resource or "") for c in charges(self.snapshot, came))
        if change.kind is not ChangeKind.RAISE_LIMIT:
            return None
        if change.resource == "action_concurrency":
            return len(came)
        if change.resource != "run_concurrency":
            return None  # depth counts the queued actions ahead, let in or not
        # Runs that hold a slot already, the action's own among them (the model's fix has it).
        held = [a for a, _ in self.admitted] + [
            a for a in self.snapshot.actions
            if a.state is ActionState.RUNNING or a.id == self.action_id
        ]  # fmt: skip
        active = {a.run_id for a in held if a.queue == change.queue}
        return len({a.run_id for a in came} - active)

    def of(self, change: Change) -> list[Change]:
        q = change.queue
        mine = [a for a in self.ahead if a.queue == q]
        match change.kind:
            case ChangeKind.RAISE_CAP:
                resource, value = change.resource or "", int(change.value or 0)
                steps = np.cumsum([c.amount(resource) for c in charges(self.snapshot, mine)])
                values = sorted({value, *(value + int(step) for step in steps)})
                return [change.model_copy(update={"value": v}) for v in values]
            case ChangeKind.RAISE_LIMIT:
                more = (
                    len({a.run_id for a in mine})
                    if change.resource == "run_concurrency"
                    else len(mine)
                )
                return [_raised(change, k) for k in range(more + 1)]
            case ChangeKind.ADD_NODES:
                # Any of them may come in first, routed there or not: the room lets work
                # routed there move out of the way of the rest.
                more = min(MOST_EXTRA_NODES, len(self.ahead))
                return [_raised(change, k) for k in range(more + 1)]
            case ChangeKind.WAIT_FOR_FINISH:
                return self._finishing(change)
        return [change]

    def _finishing(self, change: Change) -> list[Change]:
        """From the work the model says must finish up to all the queue's work can free,
        each version naming the actions that finish: running ones, and ones the tick admits
        ahead of this one (they start now and hold the room until they finish)."""
        work = [
            a
            for a in self.snapshot.actions
            if a.queue == change.queue and a.state is ActionState.RUNNING
        ] + [as_running(a, d) for a, d in self.admitted if a.queue == change.queue]
        resource, wanted = change.resource or "", change.amount or 0
        if resource == FINISH_ACTIONS:
            ranked = [[a] for a in work]
            holds = [1] * len(ranked)
        elif resource == FINISH_RUNS:
            runs: dict[str, list[Action]] = {}
            for a in work:
                runs.setdefault(a.run_id, []).append(a)
            ranked = [runs[run] for run in sorted(runs)]
            holds = [1] * len(ranked)
        else:
            amounts = [c.amount(resource) for c in charges(self.snapshot, work)]
            pairs = sorted(
                ((amount, a.id, a) for amount, a in zip(amounts, work, strict=True)),
                key=lambda pair: (-pair[0], pair[1]),
            )
            ranked = [[a] for amount, _, a in pairs if amount]
            holds = [amount for amount, _, _ in pairs if amount]
        rungs: list[Change] = []
        freed, gone = 0, []
        for hold, actions in zip(holds, ranked, strict=True):
            freed += hold
            gone += [a.id for a in actions]
            if freed >= wanted:
                # The first version frees what the model says must finish; the next ones,
                # all that their work holds.
                amount = freed if rungs else wanted
                rungs.append(change.model_copy(update={"amount": amount, "actions": sorted(gone)}))
        return rungs or [change]

    def wait_words(self, changes: list[Change]) -> str:
        parts = []
        for change in changes:
            amount = change.amount or 0
            if change.resource == FINISH_RUNS:
                what = counted(amount, "run slot")
            elif change.resource == FINISH_ACTIONS:
                what = counted(amount, "action slot")
            else:
                what = _freed(change.resource or "", amount)
            names = change.actions[:MOST_NAMED] + (
                [f"{len(change.actions) - MOST_NAMED} more"]
                if len(change.actions) > MOST_NAMED
                else []
            )
            parts.append(f"{what} ({_sentence(names)} finishing)")
        return f"or wait until queue {changes[0].queue}'s running work frees {_sentence(parts)}"


def _raised(change: Change, more: int) -> Change:
    return change.model_copy(
        update={"value": int(change.value or 0) + more, "amount": (change.amount or 0) + more}
    )


def _freed(resource: str, amount: int) -> str:
    """`2 untyped GPUs`, `1 nvidia_gpu/nvidia-h100`, `40Gi memory`."""
    if resource == UNTYPED_GPU:
        return counted(amount, "untyped GPU")
    if "/" in resource:
        return f"{amount} {resource}"
    return f"{format_quantity(resource, amount)} {resource}"


def _sentence(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def _binding(items: list[Item], free: np.ndarray, bounded: np.ndarray) -> tuple[int, Item]:
    """The dimension and container that tell the pool's story best: the container that fits
    no node by the widest margin (GPUs first), else the dimension the containers together
    are shortest of."""
    largest = free.max(axis=0)
    best: tuple[tuple[int, int], int, Item] | None = None
    for item in items:
        for found in np.flatnonzero(bounded & (item.request > largest)):
            d = int(found)
            short = int(item.request[d] - largest[d])
            key = (int(d == GPU_DIM), short * 1000 // max(int(item.request[d]), 1))
            if best is None or key > best[0]:
                best = (key, d, item)
    if best is not None:
        return best[1], best[2]
    together = sum(item.request for item in items)
    total = free.sum(axis=0)
    ratio = np.where(bounded & (total > 0), together / np.maximum(total, 1), 0)
    ratio = np.where(bounded & (total == 0) & (together > 0), np.inf, ratio)
    widest = int(np.argmax(ratio))
    return widest, max(items, key=lambda item: item.request[widest])


def _may_fit(items: list[Item], free: np.ndarray, bounded: np.ndarray) -> bool:
    """Each container fits some node and all fit in total: enough to name the pool's story
    "lower priority" (the minimal core, not this test, decides that the pool matters)."""
    if not items:
        return False
    largest = free.max(axis=0)
    together = sum(item.request for item in items)
    each = all(((item.request <= largest) | ~bounded).all() for item in items)
    return each and bool(((together <= free.sum(axis=0)) | ~bounded).all())
