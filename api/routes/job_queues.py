"""Quota-managed job queues: scheduling policies, service environments, job queues and shares.

Every limit of models.quota is checked where a body is read (INVALID_ARGUMENT naming
the field); a job queue that would be INVALID (its policy has no quota share policy,
its environment serves another queue, a share limits a type the environment lacks)
is refused when it is created or changed. A later change to a policy or an
environment is not refused: the queue then reports INVALID with the reason.
"""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import (
    CREATED_RESPONSE,
    JobQueueName,
    PolicyName,
    PrincipalDep,
    ServiceEnvironmentName,
    ShareName,
    StoreDep,
    TickerDep,
    created,
    exists,
)
from api.errors import error_responses
from api.schemas.job_queues import (
    JobQueueCreate,
    JobQueuePublic,
    JobQueueUpdate,
    QuotaShareIn,
    QuotaShareUpdate,
    SchedulingPolicyIn,
    ServiceEnvironmentIn,
    with_share,
)
from api.views import job_queue_view, job_queue_views
from models.errors import FailedPrecondition, NotFound
from models.quota import JobQueue, SchedulingPolicy, ServiceEnvironment

policies = APIRouter(prefix="/scheduling-policies", tags=["job queues"])
environments = APIRouter(prefix="/service-environments", tags=["job queues"])
router = APIRouter(prefix="/job-queues", tags=["job queues"])
routers = (policies, environments, router)


@policies.put("/{name}", responses={**error_responses(403), **CREATED_RESPONSE})
def put_scheduling_policy(
    name: PolicyName,
    body: SchedulingPolicyIn,
    store: StoreDep,
    who: PrincipalDep,
    response: Response,
) -> SchedulingPolicy:
    """Create or replace a policy; only one with a quota_share_policy serves quota shares."""
    who.require_admin("define scheduling policies")
    new = not exists(store.get_scheduling_policy, name)
    policy = store.put_scheduling_policy(body.to_policy(name))
    if new:
        created(response, "scheduling-policies", name)
    return policy


@policies.get("")
def list_scheduling_policies(store: StoreDep, _: PrincipalDep) -> list[SchedulingPolicy]:
    return store.list_scheduling_policies()


@policies.get("/{name}", responses=error_responses(404))
def get_scheduling_policy(name: PolicyName, store: StoreDep, _: PrincipalDep) -> SchedulingPolicy:
    return store.get_scheduling_policy(name)


@policies.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404, 409)
)
def delete_scheduling_policy(name: PolicyName, store: StoreDep, who: PrincipalDep) -> None:
    """Refused (FAILED_PRECONDITION) while a job queue uses it."""
    who.require_admin("delete scheduling policies")
    store.delete_scheduling_policy(name)


@environments.put("/{name}", responses={**error_responses(403), **CREATED_RESPONSE})
def put_service_environment(
    name: ServiceEnvironmentName,
    body: ServiceEnvironmentIn,
    store: StoreDep,
    who: PrincipalDep,
    response: Response,
) -> ServiceEnvironment:
    """Create or replace an environment's capacity limits (per instance type).

    A lowered limit applies from the next tick; jobs above it may then be preempted."""
    who.require_admin("define service environments")
    new = not exists(store.get_service_environment, name)
    environment = store.put_service_environment(body.to_environment(name))
    if new:
        created(response, "service-environments", name)
    return environment


@environments.get("")
def list_service_environments(store: StoreDep, _: PrincipalDep) -> list[ServiceEnvironment]:
    return store.list_service_environments()


@environments.get("/{name}", responses=error_responses(404))
def get_service_environment(
    name: ServiceEnvironmentName, store: StoreDep, _: PrincipalDep
) -> ServiceEnvironment:
    return store.get_service_environment(name)


@environments.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404, 409)
)
def delete_service_environment(
    name: ServiceEnvironmentName, store: StoreDep, who: PrincipalDep
) -> None:
    """Refused (FAILED_PRECONDITION) while a job queue runs on it."""
    who.require_admin("delete service environments")
    store.delete_service_environment(name)


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 404, 409))
def create_job_queue(
    body: JobQueueCreate, store: StoreDep, ticker: TickerDep, who: PrincipalDep, response: Response
) -> JobQueuePublic:
    """A job queue with 1 to 20 quota shares; it must be VALID to be created."""
    who.require_admin("create job queues")
    store.create_job_queue(body.to_job_queue())
    created(response, "job-queues", body.name)
    return job_queue_view(store, ticker, body.name)


@router.get("")
def list_job_queues(store: StoreDep, ticker: TickerDep, _: PrincipalDep) -> list[JobQueuePublic]:
    return job_queue_views(store, ticker)


@router.get("/{name}", responses=error_responses(404))
def get_job_queue(
    name: JobQueueName, store: StoreDep, ticker: TickerDep, _: PrincipalDep
) -> JobQueuePublic:
    """State, status and reason; per share its limits, usage, borrowed, lent and line."""
    return job_queue_view(store, ticker, name)


@router.patch("/{name}", responses=error_responses(403, 404, 409))
def update_job_queue(
    name: JobQueueName, body: JobQueueUpdate, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> JobQueuePublic:
    """Change state, policy, environment or the whole list of shares, from the next tick."""
    who.require_admin("change job queues")
    store.update_job_queue(name, body.apply)
    return job_queue_view(store, ticker, name)


@router.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404, 409)
)
def delete_job_queue(name: JobQueueName, store: StoreDep, who: PrincipalDep) -> None:
    """Refused (FAILED_PRECONDITION) while it holds live jobs; its finished jobs stay."""
    who.require_admin("delete job queues")
    store.delete_job_queue(name)


@router.put(
    "/{name}/shares/{share}", responses={**error_responses(403, 404, 409), **CREATED_RESPONSE}
)
def put_quota_share(
    name: JobQueueName,
    share: ShareName,
    body: QuotaShareIn,
    store: StoreDep,
    ticker: TickerDep,
    who: PrincipalDep,
    response: Response,
) -> JobQueuePublic:
    """Add a share (201), or replace the one of this name."""
    who.require_admin("change job queues")
    replacement = body.to_share(share)
    added = False

    def put(queue: JobQueue) -> JobQueue:
        nonlocal added
        added = queue.share(share) is None  # judged inside the store's write transaction
        return with_share(queue, replacement)

    store.update_job_queue(name, put)
    if added:
        created(response, "job-queues", name, "shares", share)
    return job_queue_view(store, ticker, name)


@router.patch("/{name}/shares/{share}", responses=error_responses(403, 404, 409))
def update_quota_share(
    name: JobQueueName,
    share: ShareName,
    body: QuotaShareUpdate,
    store: StoreDep,
    ticker: TickerDep,
    who: PrincipalDep,
) -> JobQueuePublic:
    """Change some of a share's fields; a lowered limit makes what it holds above it
    eligible for preemption."""
    who.require_admin("change job queues")

    def change(queue: JobQueue) -> JobQueue:
        current = queue.share(share)
        if current is None:
            raise NotFound(f"job queue {name} has no quota share {share!r}", field="share")
        return with_share(queue, body.apply(current))

    store.update_job_queue(name, change)
    return job_queue_view(store, ticker, name)


@router.delete(
    "/{name}/shares/{share}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(403, 404, 409),
)
def delete_quota_share(
    name: JobQueueName, share: ShareName, store: StoreDep, who: PrincipalDep
) -> None:
    """Remove a share without live jobs (a queue keeps at least one)."""
    who.require_admin("change job queues")

    def change(queue: JobQueue) -> JobQueue:
        if queue.share(share) is None:
            raise NotFound(f"job queue {name} has no quota share {share!r}", field="share")
        if len(queue.quota_shares) == 1:
            raise FailedPrecondition(
                f"quota share {share} is the last of job queue {name}; a job queue holds at"
                " least one",
                field="share",
            )
        kept = [s for s in queue.quota_shares if s.name != share]
        return queue.model_copy(update={"quota_shares": kept})

    store.update_job_queue(name, change)
