"""Task templates: what a submission naming the task gets unless it says otherwise.

A template that names queues needs rights on each to create or delete; one without any, an
admin (every queue's submitters may use it)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.auth import Principal
from api.deps import PrincipalDep, StoreDep, TaskName, created
from api.errors import error_responses
from api.schemas.tasks import TaskCreate, TaskPublic
from models.tasks import TaskTemplate

router = APIRouter(prefix="/tasks", tags=["tasks"])


def _require_rights(who: Principal, task: TaskTemplate, doing: str) -> None:
    if not task.queues:
        who.require_admin(f"{doing} a task without a queue")
    for queue in task.queues:
        who.require_queue(queue, doing)


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 404, 409))
def create_task(
    body: TaskCreate, store: StoreDep, who: PrincipalDep, response: Response
) -> TaskPublic:
    """The queues it names must exist; an environment is looked up when a submission uses it."""
    task = body.to_task()
    _require_rights(who, task, "create tasks")
    store.create_task(task)
    created(response, "tasks", task.name)
    return TaskPublic.of(task)


@router.get("")
def list_tasks(store: StoreDep, _: PrincipalDep) -> list[TaskPublic]:
    return [TaskPublic.of(task) for task in store.list_tasks()]


@router.get("/{name}", responses=error_responses(404))
def get_task(name: TaskName, store: StoreDep, _: PrincipalDep) -> TaskPublic:
    return TaskPublic.of(store.get_task(name))


@router.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404)
)
def delete_task(name: TaskName, store: StoreDep, who: PrincipalDep) -> None:
    """Actions submitted from it keep what they were given."""
    _require_rights(who, store.get_task(name), f"delete task {name}, which is")
    store.delete_task(name)
