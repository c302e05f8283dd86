"""The whole input of one tick: queues, clusters, settings, environments and actions.

These are the boundary models: a scenario file, an HTTP body and an Arrow
snapshot all validate into them. Quantities, devices and durations are parsed
here once (see models.fields); the solver never sees a spelling.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Self, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from models.devices import AcceleratorRequest
from models.errors import InvalidInput
from models.fields import (
    AcceleratorCaps,
    CpuQuantity,
    Deadline,
    DeviceName,
    Duration,
    GpuRequest,
    MemoryQuantity,
    ResourceCaps,
    ResourceMap,
    Timestamp,
    format_duration,
)
from models.limits import (
    MAX_ACCELERATORS,
    MAX_CAP,
    MAX_CLUSTER_ROOM,
    MAX_EXPECTED_DURATION,
    MAX_NODES,
    MAX_QUEUE_COUNT,
    MAX_QUEUE_PRIORITY,
    MAX_REPLICAS,
)
from models.quantity import CPU, MEMORY, format_quantity
from models.quota import (
    Job,
    JobQueue,
    SchedulingPolicy,
    ServiceEnvironment,
    check_quota_references,
)
from models.resources import ResourceVector, caps_of

DEFAULT_QUEUE = "default"
DEFAULT_POOL = "default"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_true_or_false_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """`true` and `false` are not numbers, but pydantic's lax mode reads them as 1 and 0:
        `max_gpus: false` was a cap of 0 (found by the schemathesis run)."""
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if annotation not in (bool, Any) and bool not in get_args(annotation):
                raise ValueError("true/false where a value is expected")
        return value


class Scheduling(StrEnum):
    STRICT_FIFO = "strict_fifo"
    GREEDY_CAPACITY = "greedy_capacity"


QueueCount = Annotated[int, Field(ge=0, le=MAX_QUEUE_COUNT)]


class Queue(Strict):
    """A team's lane: concurrency, depth, priority, caps and a scheduling policy."""

    name: str = Field(min_length=1)
    pool: str = DEFAULT_POOL
    run_concurrency: QueueCount | None = None
    action_concurrency: QueueCount | None = None
    depth: QueueCount | None = None
    priority: int = Field(default=0, ge=-MAX_QUEUE_PRIORITY, le=MAX_QUEUE_PRIORITY)
    max_resources: ResourceCaps = Field(default_factory=dict)
    max_gpus: int | None = Field(default=None, ge=0, le=MAX_CAP)
    max_accelerators: AcceleratorCaps = Field(default_factory=dict)
    scheduling: Scheduling = Scheduling.GREEDY_CAPACITY
    clusters: list[str] | None = None
    head_blocked_since: Timestamp | None = None  # carried from the previous tick

    @property
    def caps(self) -> ResourceVector:
        """Every cap by canonical name: max_resources, max_accelerators, max_gpus as `gpu`."""
        return caps_of(self.max_resources, self.max_accelerators, self.max_gpus)


class NodeShape(Strict):
    """The allocatable room of one node of a pool."""

    cpu: CpuQuantity = Field(
        description="Allocatable CPU of one node: cores (`8`, `7.5`) or millicores (`7500m`);"
        " answers spell it as a Kubernetes quantity."
    )
    memory: MemoryQuantity = Field(
        description="Allocatable memory of one node: a Kubernetes quantity (`64Gi`) or bytes."
    )
    accelerator: DeviceName = Field(
        default=None,
        description="The device each node carries (`H100`, `nvidia-t4`, a MIG profile such as"
        " `A100/1g.5gb`); null: none.",
    )
    accelerators: int = Field(
        default=0,
        ge=0,
        le=MAX_ACCELERATORS,
        description="How many `accelerator` devices each node has.",
    )
    resources: ResourceMap = Field(
        default_factory=dict,
        description="Other named resources one node offers, resource -> quantity; null or"
        " omitted: none.",
    )

    @model_validator(mode="after")
    def _accelerator_named(self) -> Self:
        if self.accelerators and self.accelerator is None:
            raise InvalidInput("node.accelerators: set node.accelerator to say which device")
        return self

    @property
    def room(self) -> dict[str, int]:
        """cpu, memory and every other declared resource, in solver units."""
        return {**self.resources, CPU: self.cpu, MEMORY: self.memory}


class NodePool(Strict):
    name: str = Field(min_length=1, description="The pool's name, unique in its cluster.")
    node: NodeShape = Field(description="The shape of every node of the pool.")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="The pool's node labels, which containers' `node_selector` must match.",
    )
    nodes: int = Field(default=0, ge=0, le=MAX_NODES, description="Nodes up now.")
    max_nodes: int | None = Field(
        default=None,
        ge=0,
        le=MAX_NODES,
        description="The most nodes the pool scales to (at least `nodes`); null: it stays at"
        " `nodes`.",
    )

    @model_validator(mode="after")
    def _scale(self) -> Self:
        if self.max_nodes is not None and self.max_nodes < self.nodes:
            raise InvalidInput(
                f"node pool {self.name}: max_nodes {self.max_nodes} is below nodes {self.nodes}"
            )
        return self

    @property
    def full_scale(self) -> int:
        return self.nodes if self.max_nodes is None else self.max_nodes


class Cluster(Strict):
    name: str = Field(min_length=1, description="The cluster's name.")
    node_pools: list[NodePool] = Field(
        default_factory=list, description="Its node pools, each name once."
    )

    @model_validator(mode="after")
    def _unique_pools(self) -> Self:
        _require_unique([p.name for p in self.node_pools], f"cluster {self.name}: node pool")
        return self

    @model_validator(mode="after")
    def _bounded_room(self) -> Self:
        room: dict[str, int] = {}
        for pool in self.node_pools:
            for resource, amount in pool.node.room.items():
                room[resource] = room.get(resource, 0) + amount * pool.full_scale
        for resource, amount in room.items():
            if amount > MAX_CLUSTER_ROOM:
                raise InvalidInput(cluster_room_message(self.name, resource), field="node_pools")
        return self


class Container(Strict):
    """One container's requests. `resources.gpu` is lifted into `gpu` on load."""

    name: str = Field(default="main", description="The container's name, unique in its action.")
    resources: ResourceMap = Field(
        default_factory=dict,
        description='What it requests, resource -> Kubernetes quantity (`cpu: "8"`, `memory:'
        ' "32Gi"`); a `gpu` entry is read as `gpu`.',
    )
    gpu: GpuRequest = Field(
        default=None, description='"H100:4", "T4" (typed) or 2 (untyped NVIDIA GPUs); null: no GPU.'
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Labels a node pool must carry for the container to land on it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _gpu_in_resources(cls, data: Any) -> Any:
        return _lift_gpu(data)

    def fields(self) -> ContainerFields:
        """Its fields as they are, hashable: equal only for containers equal field by field
        with their maps in the same order (so one may stand for the other in any output)."""
        return (
            self.name,
            tuple(self.resources.items()),
            self.gpu,
            tuple(self.node_selector.items()),
        )


ContainerFields = tuple[
    str, tuple[tuple[str, int], ...], AcceleratorRequest | None, tuple[tuple[str, str], ...]
]


class ContainerPlacement(Strict):
    name: str = Field(default="main", description="The container, by name.")
    node_pool: str = Field(description="The node pool it is placed in.")
    node: NonNegativeInt = Field(description="The node's index in its pool, from 0.")


class Placement(Strict):
    cluster: str = Field(description="The cluster it runs on; all its containers are placed there.")
    containers: list[ContainerPlacement] = Field(description="Where each container is placed.")


class ActionState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"


class Action(Strict):
    """A task invocation waiting in, or running from, a queue."""

    id: str = Field(min_length=1)
    run: str | None = None  # defaults to the action's own id: a run of one action
    queue: str = DEFAULT_QUEUE
    submitted_at: Timestamp
    state: ActionState = ActionState.QUEUED
    placement: Placement | None = None
    containers: list[Container] = Field(default_factory=list)
    environment: str | None = None
    max_queued_time: Duration | None = None
    deadline: Deadline | None = None  # a time, or a duration from submission
    # What forecasts read (solver.replay.forecast); the engine ignores them.
    task: str | None = Field(default=None, min_length=1)  # the stored task it was submitted as
    expected_duration: Duration | None = None  # the submitter's estimate of its run time
    started_at: Timestamp | None = None  # when a running action started; None: not known

    @field_validator("expected_duration")
    @classmethod
    def _expected_within_a_year(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and not timedelta(0) < value <= MAX_EXPECTED_DURATION:
            raise InvalidInput(
                f"expected_duration: {format_duration(value)} is not above 0s and at most"
                f" {format_duration(MAX_EXPECTED_DURATION)}",
                field="expected_duration",
            )
        return value

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.environment is None and not self.containers:
            raise InvalidInput(f"action {self.id}: needs containers or an environment")
        if self.environment is not None and self.containers:
            raise InvalidInput(
                f"action {self.id}: runs in environment {self.environment}, so it has no containers"
            )
        _require_unique([c.name for c in self.containers], f"action {self.id}: container")
        running = self.state is ActionState.RUNNING
        if running and self.environment is None and self.placement is None:
            raise InvalidInput(f"action {self.id}: a running action needs its placement")
        if not running and self.started_at is not None:
            raise InvalidInput(f"action {self.id}: a queued action has not started")
        return self

    @property
    def run_id(self) -> str:
        return self.run or self.id

    def deadline_at(self) -> datetime | None:
        if self.deadline is None or isinstance(self.deadline, datetime):
            return self.deadline
        return self.submitted_at + self.deadline


class Environment(Strict):
    """A reusable container pool, charged once when it starts."""

    name: str = Field(min_length=1, description="The reusable environment's name.")
    queue: str = Field(
        default=DEFAULT_QUEUE,
        description="The queue whose caps and concurrency the started pool is charged to.",
    )
    replicas: int = Field(
        default=1,
        ge=1,
        le=MAX_REPLICAS,
        description="How many containers of this size the pool runs.",
    )
    resources: ResourceMap = Field(
        default_factory=dict,
        description='What each replica requests, resource -> Kubernetes quantity (`cpu: "8"`,'
        ' `memory: "32Gi"`).',
    )
    gpu: GpuRequest = Field(
        default=None,
        description='Each replica\'s GPUs: "H100:4", "T4" (typed) or 2 (untyped NVIDIA GPUs);'
        " null: no GPU.",
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Labels a node pool must carry for the replicas to land on it.",
    )
    running: bool = Field(
        default=False,
        description="Whether the pool is started (placed and charged); actions in it run on its"
        " replicas.",
    )
    placement: Placement | None = Field(
        default=None, description="Where its replicas are placed while it runs; null while stopped."
    )

    @model_validator(mode="before")
    @classmethod
    def _gpu_in_resources(cls, data: Any) -> Any:
        return _lift_gpu(data)

    @model_validator(mode="after")
    def _placed_when_running(self) -> Self:
        if self.running and self.placement is None:
            raise InvalidInput(f"environment {self.name}: a running pool needs its placement")
        return self

    def replica_containers(self) -> list[Container]:
        # Fields are already parsed; validating again would read millicores as cores.
        return [
            Container.model_construct(
                name=f"replica-{index}",
                resources=dict(self.resources),
                gpu=self.gpu,
                node_selector=dict(self.node_selector),
            )
            for index in range(self.replicas)
        ]


class Settings(Strict):
    default_gpu_type: DeviceName = Field(
        default=None,
        description="The device an untyped GPU request (`gpu: 2`) means; null: any NVIDIA GPU,"
        " counted against `max_gpus`.",
    )


class Snapshot(Strict):
    """Everything one tick needs, validated as a whole."""

    now: Timestamp
    settings: Settings = Field(default_factory=Settings)
    queues: list[Queue] = Field(default_factory=list)
    clusters: list[Cluster] = Field(default_factory=list)
    actions: list[Action] = Field(default_factory=list)  # queued ones in arrival order
    environments: list[Environment] = Field(default_factory=list)
    # Quota-managed job queues (models.quota), next to the capped queues above.
    scheduling_policies: list[SchedulingPolicy] = Field(default_factory=list)
    service_environments: list[ServiceEnvironment] = Field(default_factory=list)
    job_queues: list[JobQueue] = Field(default_factory=list)
    jobs: list[Job] = Field(default_factory=list)  # queued ones in arrival order

    @model_validator(mode="after")
    def _quota_references(self) -> Self:
        check_quota_references(
            self.scheduling_policies, self.service_environments, self.job_queues, self.jobs
        )
        return self

    @model_validator(mode="after")
    def _references(self) -> Self:
        if not any(q.name == DEFAULT_QUEUE for q in self.queues):
            self.queues.append(Queue(name=DEFAULT_QUEUE))
        _require_unique([q.name for q in self.queues], "queue")
        _require_unique([c.name for c in self.clusters], "cluster")
        _require_unique([a.id for a in self.actions], "action")
        _require_unique([e.name for e in self.environments], "environment")
        queues = {q.name for q in self.queues}
        clusters = {c.name: c for c in self.clusters}
        environments = {e.name: e for e in self.environments}
        for queue in self.queues:
            for name in queue.clusters or []:
                if name not in clusters:
                    raise InvalidInput(f"queue {queue.name}: routes to unknown cluster {name!r}")
        for env in self.environments:
            if env.queue not in queues:
                raise InvalidInput(f"environment {env.name}: unknown queue {env.queue!r}")
            if env.placement:
                _check_placement(env.placement, clusters, env.replica_containers(), env.name)
        for action in self.actions:
            if action.queue not in queues:
                raise InvalidInput(f"action {action.id}: unknown queue {action.queue!r}")
            if action.environment is not None:
                joined = environments.get(action.environment)
                if joined is None:
                    raise InvalidInput(
                        f"action {action.id}: unknown environment {action.environment!r}"
                    )
                if joined.queue != action.queue:
                    raise InvalidInput(
                        f"action {action.id}: environment {joined.name} belongs to queue"
                        f" {joined.queue}, not {action.queue}"
                    )
                if action.state is ActionState.RUNNING and not joined.running:
                    raise InvalidInput(
                        f"action {action.id}: runs in environment {joined.name},"
                        " which is not running"
                    )
            if action.placement is not None:
                if action.state is ActionState.QUEUED:
                    raise InvalidInput(f"action {action.id}: a queued action has no placement")
                _check_placement(action.placement, clusters, action.containers, action.id)
        return self

    def queue(self, name: str) -> Queue:
        for queue in self.queues:
            if queue.name == name:
                return queue
        raise InvalidInput(f"unknown queue {name!r}")


def share_equal_containers(actions: Iterable[Action]) -> None:
    """Give the actions whose lists of containers are equal (`Container.fields`, in order)
    one list, as the Arrow build does ([D410](docs/decisions.md#d410)): the engine compiles a
    list object once per queue. For a line being built, before a snapshot holds it: a list is
    replaced by an equal one, never changed ([D240](docs/decisions.md#d240))."""
    lists: dict[tuple[ContainerFields, ...], list[Container]] = {}
    for action in actions:
        if action.containers:
            key = tuple([container.fields() for container in action.containers])
            # Set as validation left it: the list is of validated, equal containers.
            action.__dict__["containers"] = lists.setdefault(key, action.containers)


def cluster_room_message(cluster: str, resource: str) -> str:
    """Why a cluster is refused whose pools at full scale hold more `resource` than the limit."""
    limit = format_quantity(resource, MAX_CLUSTER_ROOM)
    return (
        f"node_pools: cluster {cluster} holds more than {limit} of {resource} at full scale"
        " (room per node times max_nodes, summed over its pools), the limit of one cluster"
    )


def _lift_gpu(data: Any) -> Any:
    """Accept the scenario spelling `resources: {gpu: "H100:4"}` for the `gpu` field."""
    if isinstance(data, dict) and isinstance(data.get("resources"), dict):
        resources = dict(data["resources"])
        if "gpu" in resources:
            if data.get("gpu") is not None:
                raise InvalidInput("give gpu either in resources or beside them, not both")
            data = {**data, "resources": resources, "gpu": resources.pop("gpu")}
    return data


def _require_unique(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidInput(f"{what} {name!r} appears twice")
        seen.add(name)


def _check_placement(
    placement: Placement, clusters: dict[str, Cluster], containers: list[Container], owner: str
) -> None:
    cluster = clusters.get(placement.cluster)
    if cluster is None:
        raise InvalidInput(f"{owner}: placed on unknown cluster {placement.cluster!r}")
    pools = {p.name: p for p in cluster.node_pools}
    placed = {c.name for c in placement.containers}
    wanted = {c.name for c in containers}
    if placed != wanted:
        raise InvalidInput(
            f"{owner}: placement names containers {sorted(placed)}, expected {sorted(wanted)}"
        )
    for spot in placement.containers:
        pool = pools.get(spot.node_pool)
        if pool is None:
            raise InvalidInput(
                f"{owner}: placed on unknown node pool {spot.node_pool!r} of {cluster.name}"
            )
        if spot.node >= max(pool.full_scale, pool.nodes):
            raise InvalidInput(
                f"{owner}: node {spot.node} is beyond pool {pool.name}'s {pool.full_scale} nodes"
            )


__all__ = [
    "DEFAULT_POOL",
    "DEFAULT_QUEUE",
    "AcceleratorRequest",
    "Action",
    "ActionState",
    "Cluster",
    "Container",
    "ContainerPlacement",
    "Environment",
    "NodePool",
    "NodeShape",
    "Placement",
    "Queue",
    "Scheduling",
    "Settings",
    "Snapshot",
]
