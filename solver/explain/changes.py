"""Apply an explanation's changes to a snapshot: the suggestions made machine-actionable.

`apply_changes(snapshot, action_id, changes)` returns a new snapshot with the changes
made: caps raised (or removed with value None), limits raised, a policy switched,
nodes added to a pool, the action routed to another queue or its request reduced,
and, for a wait, the named work finished (taken out of the snapshot). solver.explain.replay
applies every candidate this way and re-runs the tick to prove it, the infeasibility
explainer checks a candidate with fail-fast first, and the tests re-run the whole tick.
"""

from __future__ import annotations

from collections.abc import Callable

from models.devices import AcceleratorRequest, parse_device
from models.errors import InvalidInput
from models.explanation import Change, ChangeKind
from models.resources import UNTYPED_GPU, ResourceVector
from models.snapshot import Action, ActionState, Container, Environment, Queue, Snapshot

LIMIT_SETTINGS = ("action_concurrency", "run_concurrency", "depth")
FINISH_ACTIONS = "actions"  # WAIT_FOR_FINISH resource: this many running actions finish
FINISH_RUNS = "runs"  # WAIT_FOR_FINISH resource: every action of this many active runs


def apply_changes(snapshot: Snapshot, action_id: str, changes: list[Change]) -> Snapshot:
    for change in changes:
        snapshot = _APPLY[change.kind](snapshot, action_id, change)
    return snapshot


def _queue_of(snapshot: Snapshot, change: Change, action_id: str) -> str:
    if change.queue is not None:
        return change.queue
    return _action(snapshot, action_id).queue


def _action(snapshot: Snapshot, action_id: str) -> Action:
    for action in snapshot.actions:
        if action.id == action_id:
            return action
    raise InvalidInput(f"no action {action_id!r} in the snapshot")


def _with_queue(
    snapshot: Snapshot, name: str, edit: Callable[[Queue], dict[str, object]]
) -> Snapshot:
    queues = [q.model_copy(update=edit(q)) if q.name == name else q for q in snapshot.queues]
    return snapshot.model_copy(update={"queues": queues})


def _raise_cap(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    resource = change.resource or ""
    value = change.value if isinstance(change.value, int) else None

    def edit(queue: Queue) -> dict[str, object]:
        if resource == UNTYPED_GPU:
            return {"max_gpus": value}
        field = "max_accelerators" if "/" in resource else "max_resources"
        caps = dict(getattr(queue, field))
        if value is None:
            caps.pop(resource, None)
        else:
            caps[resource] = value
        return {field: caps}

    return _with_queue(snapshot, _queue_of(snapshot, change, action_id), edit)


def _raise_limit(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    setting = change.resource or ""
    if setting not in LIMIT_SETTINGS:
        raise InvalidInput(f"raise_limit: {setting!r} is not one of {', '.join(LIMIT_SETTINGS)}")

    def edit(queue: Queue) -> dict[str, object]:
        current = getattr(queue, setting)
        if change.amount is None or current is None:
            return {setting: change.value if isinstance(change.value, int) else None}
        # By the increase: a reduced world lowers the depth by what it leaves out.
        return {setting: current + change.amount}

    return _with_queue(snapshot, _queue_of(snapshot, change, action_id), edit)


def _switch_policy(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    return _with_queue(
        snapshot, _queue_of(snapshot, change, action_id), lambda q: {"scheduling": change.value}
    )


def _add_nodes(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    clusters = []
    for cluster in snapshot.clusters:
        if cluster.name == change.cluster:
            pools = []
            for pool in cluster.node_pools:
                if pool.name == change.node_pool:
                    full = (
                        pool.full_scale + change.amount
                        if change.amount is not None
                        else int(change.value or 0)
                    )
                    pool = pool.model_copy(update={"max_nodes": full})
                pools.append(pool)
            cluster = cluster.model_copy(update={"node_pools": pools})
        clusters.append(cluster)
    return snapshot.model_copy(update={"clusters": clusters})


def _add_pool(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    """A new pool shaped like `like` ("cluster/pool"), no node up, `value` at full scale."""
    source_cluster, _, source_pool = (change.like or "").partition("/")
    source = next(
        (
            pool
            for cluster in snapshot.clusters
            if cluster.name == source_cluster
            for pool in cluster.node_pools
            if pool.name == source_pool
        ),
        None,
    )
    if source is None:
        raise InvalidInput(f"add_pool: no node pool {change.like!r} to copy")
    added = source.model_copy(
        update={"name": change.node_pool, "nodes": 0, "max_nodes": int(change.value or 1)}
    )
    clusters = [
        c.model_copy(update={"node_pools": [*c.node_pools, added]})
        if c.name == change.cluster
        else c
        for c in snapshot.clusters
    ]
    return snapshot.model_copy(update={"clusters": clusters})


def _route(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    actions = [
        a.model_copy(update={"queue": change.value}) if a.id == action_id else a
        for a in snapshot.actions
    ]
    return snapshot.model_copy(update={"actions": actions})


def _edit_containers(
    snapshot: Snapshot, action_id: str, change: Change, edit: Callable[[Container], Container]
) -> Snapshot:
    """Edit the named container of the action, or its environment's replicas."""
    action = _action(snapshot, action_id)
    if action.environment is not None:
        environments = [
            _edit_environment(env, edit) if env.name == action.environment else env
            for env in snapshot.environments
        ]
        return snapshot.model_copy(update={"environments": environments})
    actions = []
    for a in snapshot.actions:
        if a.id == action_id:
            containers = [
                edit(c) if change.container in (None, c.name) else c for c in a.containers
            ]
            a = a.model_copy(update={"containers": containers})
        actions.append(a)
    return snapshot.model_copy(update={"actions": actions})


def _edit_environment(env: Environment, edit: Callable[[Container], Container]) -> Environment:
    one = edit(
        Container.model_construct(
            name="replica-0",
            resources=dict(env.resources),
            gpu=env.gpu,
            node_selector=dict(env.node_selector),
        )
    )
    return env.model_copy(
        update={"resources": one.resources, "gpu": one.gpu, "node_selector": one.node_selector}
    )


def _reduce(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    resource, value = change.resource or "", int(change.value or 0)

    def edit(container: Container) -> Container:
        if resource == UNTYPED_GPU:
            gpu = container.gpu
            request = AcceleratorRequest(value, gpu.device) if gpu and value else None
            return container.model_copy(update={"gpu": request})
        return container.model_copy(update={"resources": {**container.resources, resource: value}})

    return _edit_containers(snapshot, action_id, change, edit)


def _change_device(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    device = parse_device(str(change.value), "change_device")

    def edit(container: Container) -> Container:
        count = container.gpu.count if container.gpu else 1
        return container.model_copy(update={"gpu": AcceleratorRequest(count, device)})

    return _edit_containers(snapshot, action_id, change, edit)


def _change_selector(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    key = change.resource or ""

    def edit(container: Container) -> Container:
        selector = dict(container.node_selector)
        if change.value is None:
            selector.pop(key, None)
        else:
            selector[key] = str(change.value)
        return container.model_copy(update={"node_selector": selector})

    return _edit_containers(snapshot, action_id, change, edit)


def _finish(snapshot: Snapshot, action_id: str, change: Change) -> Snapshot:
    """Take the named running work out, or else running work until `amount` of the resource
    is freed (biggest first)."""
    queue = _queue_of(snapshot, change, action_id)
    # Most changes name the work (every rung of an explanation's ladder does): the queue's
    # running work is looked for only when they do not.
    gone = set(change.actions) if change.actions else _freeing(snapshot, queue, change)
    actions = [a for a in snapshot.actions if a.id not in gone]
    return snapshot.model_copy(update={"actions": actions})


def _freeing(snapshot: Snapshot, queue: str, change: Change) -> set[str]:
    """The running work of `queue` that finishes to free the change's `amount`: that many
    runs or actions, or the biggest holders of its resource."""
    running = [a for a in snapshot.actions if a.state is ActionState.RUNNING and a.queue == queue]
    resource, wanted = change.resource or "", change.amount or 0
    if resource == FINISH_RUNS:
        runs = sorted({a.run_id for a in running})[:wanted]
        gone = {a.id for a in running if a.run_id in runs}
    elif resource == FINISH_ACTIONS:
        gone = {a.id for a in sorted(running, key=lambda a: a.id)[:wanted]}
    else:
        amounts = [c.amount(resource) for c in charges(snapshot, running)]
        held = sorted(zip(amounts, [a.id for a in running], strict=True), reverse=True)
        gone, freed = set(), 0
        for amount, held_by in held:
            if freed >= wanted or not amount:
                break
            gone.add(held_by)
            freed += amount
    return gone


def charges(snapshot: Snapshot, actions: list[Action]) -> list[ResourceVector]:
    """What each running action counts against its queue's caps (an untyped GPU under `gpu`
    and under the device it landed on)."""
    default = snapshot.settings.default_gpu_type
    pools = {
        (c.name, p.name): p.node.accelerator if p.node.accelerators else None
        for c in snapshot.clusters
        for p in c.node_pools
    }
    return [_charge(action, pools, default) for action in actions]


def _charge(
    action: Action, pools: dict[tuple[str, str], str | None], default: str | None
) -> ResourceVector:
    spots = {s.name: s for s in action.placement.containers} if action.placement else {}
    charged: dict[str, int] = {}
    for container in action.containers:
        for name, amount in container.resources.items():
            charged[name] = charged.get(name, 0) + amount
        gpu = container.gpu
        if gpu is None:
            continue
        device = gpu.device.canonical if gpu.device else default
        if device is None:
            charged[UNTYPED_GPU] = charged.get(UNTYPED_GPU, 0) + gpu.count
            spot = spots.get(container.name)
            if spot is not None and action.placement is not None:
                device = pools.get((action.placement.cluster, spot.node_pool))
        if device is not None:
            charged[device] = charged.get(device, 0) + gpu.count
    return ResourceVector(charged)


_APPLY: dict[ChangeKind, Callable[[Snapshot, str, Change], Snapshot]] = {
    ChangeKind.RAISE_CAP: _raise_cap,
    ChangeKind.RAISE_LIMIT: _raise_limit,
    ChangeKind.SWITCH_POLICY: _switch_policy,
    ChangeKind.ADD_NODES: _add_nodes,
    ChangeKind.ADD_POOL: _add_pool,
    ChangeKind.WAIT_FOR_FINISH: _finish,
    ChangeKind.ROUTE_TO_QUEUE: _route,
    ChangeKind.REDUCE_REQUEST: _reduce,
    ChangeKind.CHANGE_DEVICE: _change_device,
    ChangeKind.CHANGE_SELECTOR: _change_selector,
}
