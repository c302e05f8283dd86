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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import TypeAdapter

if TYPE_CHECKING:  # the models load at the first answer read: the CLI starts without FastAPI
    from api.schemas.actions import ActionPublic, BatchAccepted, Moved
    from api.schemas.job_queues import JobQueuePublic
    from api.schemas.jobs import JobPublic
    from api.schemas.queues import QueuePublic
    from api.schemas.tasks import TaskPublic
    from api.schemas.triggers import TriggerPublic

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


def path(base: str, *segments: str) -> str:
    """`base` and the segments, each URL-encoded: a name with `/`, `?` or `#` stays one segment."""
    return "/".join([base, *(quote(segment, safe="") for segment in segments)])


def drop_unset(**fields: Any) -> JSON:
    return {key: value for key, value in fields.items() if value is not None}


class Queues:
    """The capped queues: the seed's create, update, details, watch, watch_pool; list,
    drain, delete, move."""

    @staticmethod
    def create(
        name: str,
        *,
        pool: str | None = None,
        run_concurrency: int | None = None,
        action_concurrency: int | None = None,
        depth: int | None = None,
        priority: int | None = None,
        max_resources: Mapping[str, str | int] | None = None,
        max_gpus: int | None = None,
        max_accelerators: Mapping[str, int] | None = None,
        scheduling: str | None = None,
        clusters: builtins.list[str] | None = None,
    ) -> Call[QueuePublic]:
        body = drop_unset(
            name=name,
            pool=pool,
            run_concurrency=run_concurrency,
            action_concurrency=action_concurrency,
            depth=depth,
            priority=priority,
            max_resources=dict(max_resources) if max_resources is not None else None,
            max_gpus=max_gpus,
            max_accelerators=dict(max_accelerators) if max_accelerators is not None else None,
            scheduling=scheduling,
            clusters=clusters,
        )
        return Call("POST", "/queues", _QUEUE, body)

    @staticmethod
    def update(
        name: str,
        *,
        pool: str | None = None,
        run_concurrency: int | None = None,
        action_concurrency: int | None = None,
        depth: int | None = None,
        priority: int | None = None,
        max_resources: Mapping[str, str | int] | None = None,
        max_gpus: int | None = None,
        max_accelerators: Mapping[str, int] | None = None,
        scheduling: str | None = None,
        clusters: builtins.list[str] | None = None,
        clear_max_resources: bool = False,
        clear_max_gpus: bool = False,
        clear_max_accelerators: bool = False,
    ) -> Call[QueuePublic]:
        """A map replaces the queue's map: `max_resources={}` removes the resource caps, as
        does `clear_max_resources=True`."""
        changes = drop_unset(
            pool=pool,
            run_concurrency=run_concurrency,
            action_concurrency=action_concurrency,
            depth=depth,
            priority=priority,
            max_resources=dict(max_resources) if max_resources is not None else None,
            max_gpus=max_gpus,
            max_accelerators=dict(max_accelerators) if max_accelerators is not None else None,
            scheduling=scheduling,
            clusters=clusters,
        )
        if clear_max_resources:
            changes["max_resources"] = {}
        if clear_max_gpus:
            changes["max_gpus"] = None
        if clear_max_accelerators:
            changes["max_accelerators"] = {}
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


class Actions:
    """Submitting actions and following them; executors report."""

    @staticmethod
    def spec(
        *,
        queue: str | None = None,
        resources: Mapping[str, str | int] | None = None,
        gpu: str | int | None = None,
        node_selector: Mapping[str, str] | None = None,
        containers: builtins.list[JSON] | None = None,
        environment: str | None = None,
        run: str | None = None,
        id: str | None = None,
        max_queued_time: str | float | None = None,
        deadline: str | float | None = None,
        task: str | None = None,
        run_queue: str | None = None,
        expected_duration: str | float | None = None,
    ) -> JSON:
        """The body of one submission; `resources`/`gpu` describe a single container. With a
        `task`, what is not given (no container without `resources`/`gpu`) comes from it.
        `expected_duration` (`"2h"`, seconds) is how long it runs, for start forecasts."""
        from_task = task is not None and not resources and gpu is None
        if containers is None and environment is None and not from_task:
            container = drop_unset(
                resources=dict(resources or {}),
                gpu=gpu,
                node_selector=dict(node_selector) if node_selector is not None else None,
            )
            containers = [container]
        return drop_unset(
            id=id,
            run=run,
            queue=queue,
            task=task,
            run_queue=run_queue,
            containers=containers,
            environment=environment,
            max_queued_time=max_queued_time,
            deadline=deadline,
            expected_duration=expected_duration,
        )

    @staticmethod
    def submit(
        *,
        queue: str | None = None,
        resources: Mapping[str, str | int] | None = None,
        gpu: str | int | None = None,
        node_selector: Mapping[str, str] | None = None,
        containers: builtins.list[JSON] | None = None,
        environment: str | None = None,
        run: str | None = None,
        id: str | None = None,
        max_queued_time: str | float | None = None,
        deadline: str | float | None = None,
        task: str | None = None,
        run_queue: str | None = None,
        expected_duration: str | float | None = None,
    ) -> Call[ActionPublic]:
        """Queue one action (the keywords of `spec`)."""
        body = Actions.spec(
            queue=queue,
            resources=resources,
            gpu=gpu,
            node_selector=node_selector,
            containers=containers,
            environment=environment,
            run=run,
            id=id,
            max_queued_time=max_queued_time,
            deadline=deadline,
            task=task,
            run_queue=run_queue,
            expected_duration=expected_duration,
        )
        return Actions.submit_spec(body)

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
    def page(
        *,
        queue: str | None = None,
        state: str | None = None,
        cluster: str | None = None,
        run: str | None = None,
        limit: int = 100,
        order: str | None = None,
        page_token: str | None = None,
    ) -> Call[builtins.list[ActionPublic]]:
        """A page in arrival order (`order="desc"`: newest first); the transports' `page`
        also gives the next page's token."""
        params = drop_unset(
            queue=queue,
            state=state,
            cluster=cluster,
            run=run,
            limit=limit,
            order=order,
            page_token=page_token,
        )
        return Call("GET", "/actions", _ACTIONS, params=params)

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
    def submit(
        *,
        job_queue: str,
        share: str,
        instance_type: str,
        count: int | None = None,
        priority: int | None = None,
        id: str | None = None,
    ) -> Call[JobPublic]:
        body = drop_unset(
            id=id,
            job_queue=job_queue,
            share=share,
            instance_type=instance_type,
            count=count,
            priority=priority,
        )
        return Call("POST", "/jobs", _JOB, body)

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
    """Quota-managed job queues: details and list (their configuration: api/client.py)."""

    @staticmethod
    def details(name: str) -> Call[JobQueuePublic]:
        return Call("GET", path("/job-queues", name), _JOB_QUEUE)

    @staticmethod
    def list() -> Call[builtins.list[JobQueuePublic]]:
        return Call("GET", "/job-queues", _JOB_QUEUES)


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
