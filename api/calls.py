"""Every request of the HTTP API the clients make, defined once, with the type of its answer.

A builder returns a `Call[T]`: method, path, body, parameters and how to read the answer as
the server's own response model `T` (api/schemas). The transports send it: `SluiceClient.send`
returns a `T`, `AsyncSluiceClient.send` (api/async_client.py) awaits one, and the seed-shaped
classes of api/client.py return the answer's JSON, so the three never spell a request apart.

    from api.calls import Queues, Actions
    queue = client.send(Queues.details("research"))          # a QueuePublic
    queue.head_blocked, queue.in_flight_resources["cpu"]
    action = await async_client.send(Actions.submit(queue="research", resources={"cpu": "8"}))
"""

from __future__ import annotations

import builtins
import functools
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, Unpack
from urllib.parse import quote

from pydantic import TypeAdapter

if TYPE_CHECKING:  # the models load at the first answer read: the CLI starts without FastAPI
    from api.schemas.actions import ActionExplanation, ActionPublic, BatchAccepted, Moved
    from api.schemas.environments import EnvironmentPublic
    from api.schemas.job_queues import JobQueuePublic
    from api.schemas.jobs import JobPublic
    from api.schemas.queues import QueuePublic
    from api.schemas.tasks import TaskPublic
    from api.schemas.triggers import TriggerPublic
    from models.quota import SchedulingPolicy, ServiceEnvironment
    from models.snapshot import Cluster, Settings

T = TypeVar("T")
JSON = dict[str, Any]


@dataclass(frozen=True)
class Answer(Generic[T]):
    """The type of an answer, by name (`api.schemas.queues:QueuePublic`, a list of them with
    `many`, None without a name), turned into a validator when first read."""

    model: str | None
    many: bool = False

    def adapter(self) -> TypeAdapter[T]:
        return _adapter(self.model, self.many)


@functools.cache
def _adapter(model: str | None, many: bool) -> TypeAdapter[Any]:
    if model is None:
        return TypeAdapter(type(None))
    module, name = model.split(":")
    kind = getattr(importlib.import_module(module), name)
    return TypeAdapter(list[kind] if many else kind)  # type: ignore[valid-type]


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the type of its answer."""

    method: str
    path: str
    answer: Answer[T]
    body: Any = None
    params: dict[str, Any] | None = None

    def read(self, data: Any) -> T:
        """The answer's JSON as the server's model; a mismatch is the server's bug."""
        return self.answer.adapter().validate_python(data)


@dataclass(frozen=True)
class Stream(Generic[T]):
    """A server-sent event stream whose events read as `T`."""

    path: str
    event: Answer[T]
    params: dict[str, Any] | None = None

    def read(self, data: Any) -> T:
        return self.event.adapter().validate_python(data)


_NOTHING: Answer[None] = Answer(None)
_QUEUE: Answer[QueuePublic] = Answer("api.schemas.queues:QueuePublic")
_QUEUES: Answer[list[QueuePublic]] = Answer("api.schemas.queues:QueuePublic", many=True)
_ACTION: Answer[ActionPublic] = Answer("api.schemas.actions:ActionPublic")
_ACTIONS: Answer[list[ActionPublic]] = Answer("api.schemas.actions:ActionPublic", many=True)
_EXPLANATION: Answer[ActionExplanation] = Answer("api.schemas.actions:ActionExplanation")
_BATCH: Answer[BatchAccepted] = Answer("api.schemas.actions:BatchAccepted")
_MOVED: Answer[Moved] = Answer("api.schemas.actions:Moved")
_JOB: Answer[JobPublic] = Answer("api.schemas.jobs:JobPublic")
_JOBS: Answer[list[JobPublic]] = Answer("api.schemas.jobs:JobPublic", many=True)
_JOB_QUEUE: Answer[JobQueuePublic] = Answer("api.schemas.job_queues:JobQueuePublic")
_JOB_QUEUES: Answer[list[JobQueuePublic]] = Answer(
    "api.schemas.job_queues:JobQueuePublic", many=True
)
_TRIGGER: Answer[TriggerPublic] = Answer("api.schemas.triggers:TriggerPublic")
_TRIGGERS: Answer[list[TriggerPublic]] = Answer("api.schemas.triggers:TriggerPublic", many=True)
_TASK: Answer[TaskPublic] = Answer("api.schemas.tasks:TaskPublic")
_TASKS: Answer[list[TaskPublic]] = Answer("api.schemas.tasks:TaskPublic", many=True)
_POLICY: Answer[SchedulingPolicy] = Answer("models.quota:SchedulingPolicy")
_POLICIES: Answer[list[SchedulingPolicy]] = Answer("models.quota:SchedulingPolicy", many=True)
_SERVICE_ENVIRONMENT: Answer[ServiceEnvironment] = Answer("models.quota:ServiceEnvironment")
_SERVICE_ENVIRONMENTS: Answer[list[ServiceEnvironment]] = Answer(
    "models.quota:ServiceEnvironment", many=True
)
_CLUSTER: Answer[Cluster] = Answer("models.snapshot:Cluster")
_CLUSTERS: Answer[list[Cluster]] = Answer("models.snapshot:Cluster", many=True)
_SETTINGS: Answer[Settings] = Answer("models.snapshot:Settings")
_ENVIRONMENT: Answer[EnvironmentPublic] = Answer("api.schemas.environments:EnvironmentPublic")
_ENVIRONMENTS: Answer[list[EnvironmentPublic]] = Answer(
    "api.schemas.environments:EnvironmentPublic", many=True
)


def path(base: str, *segments: str) -> str:
    """`base` and the segments, each URL-encoded: a name with `/`, `?` or `#` stays one segment."""
    return "/".join([base, *(quote(segment, safe="") for segment in segments)])


def without(body: JSON, *keys: str) -> JSON:
    """`body` but `keys` (a name a PUT gives in its path)."""
    return {key: value for key, value in body.items() if key not in keys}


def drop_unset(**fields: Any) -> JSON:
    """The fields given, as JSON: None left out, a mapping as a dict."""
    return {
        key: dict(value) if isinstance(value, Mapping) else value
        for key, value in fields.items()
        if value is not None
    }


class QueueSettings(TypedDict, total=False):
    """A queue's settings, the keywords of `Queues.create`/`update` and `Queue.create`/`update`
    (omitted or None: not sent; see QueueCreate for what each means)."""

    pool: str | None
    run_concurrency: int | None
    action_concurrency: int | None
    depth: int | None
    priority: int | None
    max_resources: Mapping[str, str | int] | None
    max_gpus: int | None
    max_accelerators: Mapping[str, int] | None
    scheduling: str | None
    clusters: list[str] | None


class ActionRequest(TypedDict, total=False):
    """What one action asks for: a submission's keywords without its place (queue, run, id),
    which is what a trigger's action gives (`Trigger`).

    `resources`, `gpu` and `node_selector` describe a single container (`containers` gives
    several); with a `task`, what is not given comes from it. `expected_duration` (`"2h"`,
    seconds) is how long it runs, for start forecasts."""

    resources: Mapping[str, str | int] | None
    gpu: str | int | None
    node_selector: Mapping[str, str] | None
    containers: list[JSON] | None
    environment: str | None
    max_queued_time: str | float | None
    deadline: str | float | None
    task: str | None
    expected_duration: str | float | None


class Submission(ActionRequest, total=False):
    """One action's keywords, for `Actions.spec`/`submit` and `Action.spec`/`submit`: what it
    asks for (ActionRequest), and where it goes: its queue, its run (`run_queue`: the queue a
    new run is created with) and its id."""

    queue: str | None
    run: str | None
    id: str | None
    run_queue: str | None


class ActionFilter(TypedDict, total=False):
    """Which actions a listing holds, and where its page starts (`Actions.page`, `Action.list`,
    `Action.page`); `order="desc"` lists the newest first."""

    queue: str | None
    state: str | None
    cluster: str | None
    run: str | None
    order: str | None
    page_token: str | None


class _JobOptions(TypedDict, total=False):
    count: int | None
    priority: int | None
    id: str | None


class JobSubmission(_JobOptions):
    """One job's keywords (`Jobs.submit`, `Job.submit`): `count` instances of `instance_type`
    for quota share `share` of `job_queue`; a higher `priority` runs first in its share."""

    job_queue: str
    share: str
    instance_type: str


class _JobQueueState(TypedDict, total=False):
    state: str | None


class JobQueueSettings(_JobQueueState):
    """A new job queue's keywords (`JobQueues.create`, `JobQueue.create`): its policy and
    service environment by name, its shares (bodies from `QuotaShares.spec`), and its state
    (ENABLED by default)."""

    scheduling_policy: str
    service_environment: str
    quota_shares: list[JSON]


class JobQueueChanges(TypedDict, total=False):
    """What `JobQueues.update` and `JobQueue.update` change; `quota_shares` (bodies from
    `QuotaShares.spec`) replaces every share."""

    state: str | None
    scheduling_policy: str | None
    service_environment: str | None
    quota_shares: list[JSON] | None


class ShareOptions(TypedDict, total=False):
    """A quota share's optional settings: `borrow_limit` (percent of each own limit, only for
    LEND_AND_BORROW) and `in_share_preemption`."""

    borrow_limit: int | None
    in_share_preemption: bool | None


class ShareChanges(ShareOptions, total=False):
    """What `QuotaShares.update` and `QuotaShare.update` change; `capacity_limits` replaces
    the share's map."""

    capacity_limits: Mapping[str, int] | None
    strategy: str | None


F = TypeVar("F", bound=Callable[..., Any])


def keywords(fields: type) -> Callable[[F], F]:
    """Show a function's `**fields: Unpack[...]` as the keywords they are.

    Editors and mypy read the TypedDict (PEP 692); `help()`, IPython and `inspect` read the
    `__signature__` this sets, so they list every keyword too, not `**fields`."""

    def sign(function: F) -> F:
        signature = inspect.signature(function)
        kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        required: frozenset[str] = getattr(fields, "__required_keys__", frozenset())
        added = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if name in required else None,
                # the annotation's text (a ForwardRef under postponed annotations)
                annotation=getattr(annotation, "__forward_arg__", annotation),
            )
            for name, annotation in fields.__annotations__.items()
        ]
        function.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
        return function

    return sign


class Queues:
    """The capped queues: the seed's create, update, details, watch, watch_pool; list,
    drain, delete, move."""

    @staticmethod
    @keywords(QueueSettings)
    def create(name: str, **settings: Unpack[QueueSettings]) -> Call[QueuePublic]:
        return Queues.create_from(drop_unset(name=name, **settings))

    @staticmethod
    def create_from(queue: JSON) -> Call[QueuePublic]:
        """Create a queue from a body (a scenario file's, with its name)."""
        return Call("POST", "/queues", _QUEUE, queue)

    @staticmethod
    @keywords(QueueSettings)
    def update(
        name: str,
        *,
        clear_max_resources: bool = False,
        clear_max_gpus: bool = False,
        clear_max_accelerators: bool = False,
        **settings: Unpack[QueueSettings],
    ) -> Call[QueuePublic]:
        """A map replaces the queue's map: `max_resources={}` removes the resource caps, as
        does `clear_max_resources=True`."""
        changes = drop_unset(**settings)
        if clear_max_resources:
            changes["max_resources"] = {}
        if clear_max_gpus:
            changes["max_gpus"] = None
        if clear_max_accelerators:
            changes["max_accelerators"] = {}
        return Queues.update_from(name, changes)

    @staticmethod
    def update_from(name: str, changes: JSON) -> Call[QueuePublic]:
        """Change a queue's fields from a body (`null` clears a limit)."""
        return Call("PATCH", path("/queues", name), _QUEUE, changes)

    @staticmethod
    def details(name: str) -> Call[QueuePublic]:
        return Call("GET", path("/queues", name), _QUEUE)

    @staticmethod
    def list(pools: builtins.list[str] | None = None) -> Call[builtins.list[QueuePublic]]:
        return Call("GET", "/queues", _QUEUES, params=drop_unset(pool=pools))

    @staticmethod
    def drain(name: str, *, undo: bool = False) -> Call[QueuePublic]:
        return Call("POST", path("/queues", name, "undrain" if undo else "drain"), _QUEUE)

    @staticmethod
    def delete(name: str) -> Call[None]:
        return Call("DELETE", path("/queues", name), _NOTHING)

    @staticmethod
    def move(name: str, *, to: str, where: str | None = None) -> Call[Moved]:
        return Call("POST", path("/queues", name, "move"), _MOVED, drop_unset(to=to, where=where))

    @staticmethod
    def watch(name: str, *, limit: int | None = None) -> Stream[QueuePublic]:
        return Stream(path("/watch", "queues", name), _QUEUE, drop_unset(limit=limit))

    @staticmethod
    def watch_pool(
        pools: builtins.list[str] | None = None, *, limit: int | None = None
    ) -> Stream[builtins.list[QueuePublic]]:
        return Stream("/watch/queues", _QUEUES, drop_unset(pool=pools, limit=limit))


_ONE_CONTAINER = ("resources", "gpu", "node_selector")


class Actions:
    """Submitting actions and following them; executors report."""

    @staticmethod
    @keywords(Submission)
    def spec(**submission: Unpack[Submission]) -> JSON:
        """The body of one submission (see Submission)."""
        body = drop_unset(**submission)
        container = {key: body.pop(key) for key in _ONE_CONTAINER if key in body}
        from_task = "task" in body and not container.get("resources") and "gpu" not in container
        if "containers" not in body and "environment" not in body and not from_task:
            body["containers"] = [{"resources": {}} | container]
        return body

    @staticmethod
    @keywords(Submission)
    def submit(**submission: Unpack[Submission]) -> Call[ActionPublic]:
        """Queue one action (the keywords of `spec`)."""
        return Actions.submit_spec(Actions.spec(**submission))

    @staticmethod
    def submit_spec(spec: JSON) -> Call[ActionPublic]:
        """Queue one action from a body (`spec`'s, or a task's)."""
        return Call("POST", "/actions", _ACTION, spec)

    @staticmethod
    def submit_batch(specs: builtins.list[JSON]) -> Call[BatchAccepted]:
        """Many actions (bodies from `spec`), all or none."""
        return Call("POST", "/actions/batch", _BATCH, {"actions": specs})

    @staticmethod
    def get(action_id: str) -> Call[ActionPublic]:
        return Call("GET", path("/actions", action_id), _ACTION)

    @staticmethod
    @keywords(ActionFilter)
    def page(
        *, limit: int = 100, **where: Unpack[ActionFilter]
    ) -> Call[builtins.list[ActionPublic]]:
        """A page in arrival order (`order="desc"`: newest first); the transports' `page`
        also gives the next page's token."""
        return Call("GET", "/actions", _ACTIONS, params=drop_unset(limit=limit, **where))

    @staticmethod
    def explanation(action_id: str) -> Call[ActionExplanation]:
        """Why it failed or waits and what would let it in, or where it runs."""
        return Call("GET", path("/actions", action_id, "explanation"), _EXPLANATION)

    @staticmethod
    def cancel(action_id: str) -> Call[ActionPublic]:
        return Call("POST", path("/actions", action_id, "cancel"), _ACTION)

    @staticmethod
    def report(
        action_id: str, outcome: str, *, code: str | None = None, message: str | None = None
    ) -> Call[ActionPublic]:
        """For executors: `started`, `succeeded` or `failed`."""
        body = drop_unset(outcome=outcome, code=code, message=message)
        return Call("POST", path("/actions", action_id, "report"), _ACTION, body)

    @staticmethod
    def move(ids: builtins.list[str], *, to: str) -> Call[Moved]:
        return Call("POST", "/actions/move", _MOVED, {"ids": ids, "to": to})


class Jobs:
    """Jobs of the quota-managed job queues."""

    @staticmethod
    @keywords(JobSubmission)
    def submit(**job: Unpack[JobSubmission]) -> Call[JobPublic]:
        return Call("POST", "/jobs", _JOB, drop_unset(**job))

    @staticmethod
    def get(job_id: str) -> Call[JobPublic]:
        return Call("GET", path("/jobs", job_id), _JOB)

    @staticmethod
    def list(
        *,
        job_queue: str | None = None,
        share: str | None = None,
        state: str | None = None,
        limit: int = 100,
    ) -> Call[builtins.list[JobPublic]]:
        params = drop_unset(job_queue=job_queue, share=share, state=state, limit=limit)
        return Call("GET", "/jobs", _JOBS, params=params)

    @staticmethod
    def cancel(job_id: str) -> Call[JobPublic]:
        return Call("POST", path("/jobs", job_id, "cancel"), _JOB)

    @staticmethod
    def report(
        job_id: str, outcome: str, *, code: str | None = None, message: str | None = None
    ) -> Call[JobPublic]:
        """For executors: `starting`, `started`, `succeeded` or `failed`."""
        body = drop_unset(outcome=outcome, code=code, message=message)
        return Call("POST", path("/jobs", job_id, "report"), _JOB, body)


class JobQueues:
    """Quota-managed job queues: create, update, details, list, delete."""

    @staticmethod
    @keywords(JobQueueSettings)
    def create(name: str, **settings: Unpack[JobQueueSettings]) -> Call[JobQueuePublic]:
        """A VALID job queue."""
        return JobQueues.create_from(drop_unset(name=name, **settings))

    @staticmethod
    def create_from(queue: JSON) -> Call[JobQueuePublic]:
        """Create a job queue from a body (a scenario file's, with its name)."""
        return Call("POST", "/job-queues", _JOB_QUEUE, queue)

    @staticmethod
    @keywords(JobQueueChanges)
    def update(name: str, **changes: Unpack[JobQueueChanges]) -> Call[JobQueuePublic]:
        """Change a live job queue."""
        return JobQueues.update_from(name, drop_unset(**changes))

    @staticmethod
    def update_from(name: str, changes: JSON) -> Call[JobQueuePublic]:
        return Call("PATCH", path("/job-queues", name), _JOB_QUEUE, changes)

    @staticmethod
    def details(name: str) -> Call[JobQueuePublic]:
        return Call("GET", path("/job-queues", name), _JOB_QUEUE)

    @staticmethod
    def list() -> Call[builtins.list[JobQueuePublic]]:
        return Call("GET", "/job-queues", _JOB_QUEUES)

    @staticmethod
    def delete(name: str) -> Call[None]:
        """Refused (FAILED_PRECONDITION) while the queue holds live jobs."""
        return Call("DELETE", path("/job-queues", name), _NOTHING)


class QuotaShares:
    """The quota shares of a job queue, one at a time (`JobQueues.update` replaces all)."""

    @staticmethod
    @keywords(ShareOptions)
    def spec(
        name: str,
        capacity_limits: Mapping[str, int],
        strategy: str,
        **options: Unpack[ShareOptions],
    ) -> JSON:
        """One share's body, for `JobQueues.create(quota_shares=[...])`."""
        return drop_unset(name=name, capacity_limits=capacity_limits, strategy=strategy, **options)

    @staticmethod
    @keywords(ShareOptions)
    def put(
        job_queue: str,
        name: str,
        capacity_limits: Mapping[str, int],
        strategy: str,
        **options: Unpack[ShareOptions],
    ) -> Call[JobQueuePublic]:
        """Add the share, or replace the one of this name; answers the job queue."""
        share = drop_unset(capacity_limits=capacity_limits, strategy=strategy, **options)
        return Call("PUT", path("/job-queues", job_queue, "shares", name), _JOB_QUEUE, share)

    @staticmethod
    @keywords(ShareChanges)
    def update(
        job_queue: str,
        name: str,
        *,
        clear_borrow_limit: bool = False,
        **changes: Unpack[ShareChanges],
    ) -> Call[JobQueuePublic]:
        """Change some fields of a live share. A lowered limit makes what the share holds
        above it eligible for preemption."""
        body = drop_unset(**changes)
        if clear_borrow_limit:
            body["borrow_limit"] = None
        where = path("/job-queues", job_queue, "shares", name)
        return Call("PATCH", where, _JOB_QUEUE, body)

    @staticmethod
    def delete(job_queue: str, name: str) -> Call[None]:
        """Remove a share without live jobs."""
        return Call("DELETE", path("/job-queues", job_queue, "shares", name), _NOTHING)


class SchedulingPolicies:
    """Scheduling policies; a job queue with quota shares needs one with a quota share policy."""

    @staticmethod
    def put(name: str, *, quota_share_policy: bool = True) -> Call[SchedulingPolicy]:
        """Create or replace `name`; with a quota share policy (FIFO, AWS's only strategy) or
        without."""
        policy = {"idle_resource_assignment_strategy": "FIFO"} if quota_share_policy else None
        return SchedulingPolicies.put_from(drop_unset(name=name, quota_share_policy=policy))

    @staticmethod
    def put_from(policy: JSON) -> Call[SchedulingPolicy]:
        """Create or replace a policy from a body (a scenario file's, with its name)."""
        where = path("/scheduling-policies", policy["name"])
        return Call("PUT", where, _POLICY, without(policy, "name"))

    @staticmethod
    def get(name: str) -> Call[SchedulingPolicy]:
        return Call("GET", path("/scheduling-policies", name), _POLICY)

    @staticmethod
    def list() -> Call[builtins.list[SchedulingPolicy]]:
        return Call("GET", "/scheduling-policies", _POLICIES)

    @staticmethod
    def delete(name: str) -> Call[None]:
        """Refused (FAILED_PRECONDITION) while a job queue uses it."""
        return Call("DELETE", path("/scheduling-policies", name), _NOTHING)


class ServiceEnvironments:
    """Service environments: the most instances of each type the job queues on one may use."""

    @staticmethod
    def put(
        name: str, capacity_limits: Mapping[str, int], *, type: str | None = None
    ) -> Call[ServiceEnvironment]:
        """Create or replace `name`, e.g. `put("sagemaker-g5", {"ml.g5.xlarge": 3})`."""
        body = drop_unset(name=name, type=type, capacity_limits=capacity_limits)
        return ServiceEnvironments.put_from(body)

    @staticmethod
    def put_from(environment: JSON) -> Call[ServiceEnvironment]:
        """Create or replace one from a body (a scenario file's, with its name)."""
        where = path("/service-environments", environment["name"])
        return Call("PUT", where, _SERVICE_ENVIRONMENT, without(environment, "name"))

    @staticmethod
    def get(name: str) -> Call[ServiceEnvironment]:
        return Call("GET", path("/service-environments", name), _SERVICE_ENVIRONMENT)

    @staticmethod
    def list() -> Call[builtins.list[ServiceEnvironment]]:
        return Call("GET", "/service-environments", _SERVICE_ENVIRONMENTS)

    @staticmethod
    def delete(name: str) -> Call[None]:
        """Refused (FAILED_PRECONDITION) while a job queue runs on it."""
        return Call("DELETE", path("/service-environments", name), _NOTHING)


class Clusters:
    """Clusters and their node pools, what the tick places work on (admins change them)."""

    @staticmethod
    def put(cluster: JSON) -> Call[Cluster]:
        """Create or replace a cluster from its whole definition (`name`, `node_pools`)."""
        return Call("PUT", path("/clusters", cluster["name"]), _CLUSTER, cluster)

    @staticmethod
    def get(name: str) -> Call[Cluster]:
        return Call("GET", path("/clusters", name), _CLUSTER)

    @staticmethod
    def list() -> Call[builtins.list[Cluster]]:
        return Call("GET", "/clusters", _CLUSTERS)

    @staticmethod
    def delete(name: str) -> Call[None]:
        """Refused while a queue routes to it or work is placed on it."""
        return Call("DELETE", path("/clusters", name), _NOTHING)


class Organization:
    """The organization's settings (`default_gpu_type`)."""

    @staticmethod
    def settings() -> Call[Settings]:
        return Call("GET", "/settings", _SETTINGS)

    @staticmethod
    def put_settings(settings: JSON) -> Call[Settings]:
        """Replace every setting (one not given takes its default)."""
        return Call("PUT", "/settings", _SETTINGS, settings)


class Environments:
    """Reusable environments: warm container pools charged once when they start."""

    @staticmethod
    def put(environment: JSON) -> Call[EnvironmentPublic]:
        """Define or replace a pool from its body (with its name; see EnvironmentIn)."""
        where = path("/environments", environment["name"])
        return Call("PUT", where, _ENVIRONMENT, without(environment, "name"))

    @staticmethod
    def get(name: str) -> Call[EnvironmentPublic]:
        return Call("GET", path("/environments", name), _ENVIRONMENT)

    @staticmethod
    def list() -> Call[builtins.list[EnvironmentPublic]]:
        return Call("GET", "/environments", _ENVIRONMENTS)

    @staticmethod
    def stop(name: str) -> Call[EnvironmentPublic]:
        """For executors: the pool's containers shut down; its charges are freed."""
        return Call("POST", path("/environments", name, "stop"), _ENVIRONMENT)


class Triggers:
    """Scheduled runs sent to a queue."""

    @staticmethod
    def create(body: JSON) -> Call[TriggerPublic]:
        return Call("POST", "/triggers", _TRIGGER, body)

    @staticmethod
    def get(name: str) -> Call[TriggerPublic]:
        return Call("GET", path("/triggers", name), _TRIGGER)

    @staticmethod
    def list() -> Call[builtins.list[TriggerPublic]]:
        return Call("GET", "/triggers", _TRIGGERS)

    @staticmethod
    def update(name: str, changes: JSON) -> Call[TriggerPublic]:
        return Call("PATCH", path("/triggers", name), _TRIGGER, changes)

    @staticmethod
    def pause(name: str, *, undo: bool = False) -> Call[TriggerPublic]:
        return Call("POST", path("/triggers", name, "resume" if undo else "pause"), _TRIGGER)

    @staticmethod
    def delete(name: str) -> Call[None]:
        return Call("DELETE", path("/triggers", name), _NOTHING)


class Tasks:
    """Stored task templates."""

    @staticmethod
    def create(body: JSON) -> Call[TaskPublic]:
        return Call("POST", "/tasks", _TASK, body)

    @staticmethod
    def get(name: str) -> Call[TaskPublic]:
        return Call("GET", path("/tasks", name), _TASK)

    @staticmethod
    def list() -> Call[builtins.list[TaskPublic]]:
        return Call("GET", "/tasks", _TASKS)

    @staticmethod
    def delete(name: str) -> Call[None]:
        return Call("DELETE", path("/tasks", name), _NOTHING)
