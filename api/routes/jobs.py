"""Jobs of the quota-managed job queues: submit, get, list, cancel; executors report.

A preempted job is QUEUED again, at its arrival place in its share's line, with
`last_preemption` saying when, why and for which job; an executor still running
it must stop it (its reports are refused with that reason).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from api.deps import (
    NEXT_PAGE_RESPONSE,
    JobId,
    ListingDep,
    PrincipalDep,
    StoreDep,
    TickerDep,
    created,
    paged,
)
from api.errors import error_responses
from api.schemas.common import JobReport
from api.schemas.jobs import JobPublic, JobSubmit, LastTick
from api.store.records import JobPhase
from api.ticker import TickLoop

router = APIRouter(prefix="/jobs", tags=["jobs"])


def _last_tick(ticker: TickLoop) -> LastTick:
    result = ticker.last_summary
    return LastTick.of(result.quota if result else None)


@router.post("", status_code=status.HTTP_201_CREATED, responses=error_responses(403, 404, 409))
def submit_job(
    body: JobSubmit, store: StoreDep, ticker: TickerDep, who: PrincipalDep, response: Response
) -> JobPublic:
    """Queue one job in its share's line; the reply comes once it is on disk.

    An unknown job queue or share is NOT_FOUND; a DISABLED job queue FAILED_PRECONDITION.
    A job whose instance type its share does not limit fails at the next tick (INFEASIBLE).
    """
    who.require_queue(body.job_queue, "submit")
    record = store.submit_job(body.to_job(datetime.now(UTC)))
    created(response, "jobs", record.job.id)
    return JobPublic.of(record, _last_tick(ticker))


@router.get("", responses=NEXT_PAGE_RESPONSE)
def list_jobs(
    store: StoreDep,
    ticker: TickerDep,
    _: PrincipalDep,
    listing: ListingDep,
    response: Response,
    job_queue: Annotated[str | None, Query(description="Only this job queue's jobs.")] = None,
    share: Annotated[
        str | None, Query(description="Only jobs of quota shares of this name.")
    ] = None,
    state: Annotated[JobPhase | None, Query(description="Only jobs in this state.")] = None,
) -> list[JobPublic]:
    """In arrival order (`order=desc`: newest first), a page at a time: a `Next-Page-Token`
    header means there is more. Executors poll `state=SCHEDULED` for work to start."""
    page = store.list_jobs(job_queue=job_queue, share=share, phase=state, listing=listing)
    paged(page.next_after, listing, response)
    last_tick = _last_tick(ticker)
    return [JobPublic.of(record, last_tick) for record in page.items]


@router.get("/{job_id}", responses=error_responses(404))
def get_job(job_id: JobId, store: StoreDep, ticker: TickerDep, _: PrincipalDep) -> JobPublic:
    return JobPublic.of(store.get_job(job_id), _last_tick(ticker))


@router.post("/{job_id}/cancel", responses=error_responses(403, 404, 409))
def cancel_job(job_id: JobId, store: StoreDep, ticker: TickerDep, who: PrincipalDep) -> JobPublic:
    """A queued job leaves its line; a scheduled or running one frees its instances."""
    who.require_queue(store.get_job(job_id).job.job_queue, "cancel")
    return JobPublic.of(store.cancel_job(job_id, datetime.now(UTC)), _last_tick(ticker))


@router.post("/{job_id}/report", responses=error_responses(403, 404, 409))
def report_job(
    job_id: JobId, body: JobReport, store: StoreDep, ticker: TickerDep, who: PrincipalDep
) -> JobPublic:
    """An executor's report: starting (it starts the containers), started, succeeded or
    failed. Finishing frees the instances."""
    who.require_executor("report job outcomes")
    record = store.report_job(job_id, body.outcome, datetime.now(UTC), body.code, body.message)
    return JobPublic.of(record, _last_tick(ticker))
