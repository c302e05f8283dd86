"""Turn a quota decision into the result: who starts, who is preempted for whom, who waits and why.

Reasons are read off the state after the tick (usage per share and pool), so each
message carries the numbers an admin would check.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from models.errors import ErrorCode
from models.quota import Job, QueueStatus, QuotaShare
from models.quota_result import (
    FailedJob,
    JobQueueUsage,
    JobWaitReason,
    PreemptedJob,
    PreemptReason,
    ScheduledJob,
    ShareUsage,
    WaitingJob,
)
from solver.quota.cp_model import Decision
from solver.quota.problem import Candidate, Holder, Pool, QuotaProblem

UsageKey = tuple[str, str, str]  # (job queue, share, instance type)


@dataclass
class Decoded:
    scheduled: list[ScheduledJob]
    preempted: list[PreemptedJob]
    waiting: list[WaitingJob]
    failed: list[FailedJob]
    job_queues: dict[str, JobQueueUsage]


def decode(problem: QuotaProblem, decision: Decision, *, limit_hit: bool) -> Decoded:
    admitted = [c for c in problem.candidates if c.job.id in decision.admitted]
    victims = [h for h in problem.holders if h.eligible and h.job.id not in decision.kept]
    stopped = {h.job.id for h in victims}
    usage = _usage_after(problem, decision.admitted, stopped)
    lines = _lines_after(problem, decision.admitted, stopped)
    position = {job.id: i for line in lines.values() for i, job in enumerate(line)}
    return Decoded(
        scheduled=[
            ScheduledJob(
                job=c.job.id,
                job_queue=c.job.job_queue,
                share=c.job.share,
                instance_type=c.job.instance_type,
                count=c.job.count,
            )
            for c in admitted
        ],
        preempted=_preempted(problem, victims, admitted, position),
        waiting=_waiting(problem, decision, usage, _added(admitted), position, limit_hit=limit_hit),
        failed=[
            FailedJob(
                job=job.id,
                job_queue=job.job_queue,
                share=job.share,
                code=ErrorCode.INFEASIBLE,
                message=problem.failures[job.id],
            )
            for job in problem.jobs
            if job.id in problem.failures
        ],
        job_queues=_job_queue_usage(problem, usage, lines),
    )


def _usage_after(
    problem: QuotaProblem, admitted: set[str], stopped: set[str]
) -> dict[UsageKey, int]:
    usage: dict[UsageKey, int] = defaultdict(int)
    for job in problem.jobs:
        holds = job.state.holds_capacity and job.id not in stopped
        if holds or job.id in admitted:
            usage[(job.job_queue, job.share, job.instance_type)] += job.count
    return usage


def _added(admitted: list[Candidate]) -> dict[UsageKey, int]:
    added: dict[UsageKey, int] = defaultdict(int)
    for c in admitted:
        added[(c.job.job_queue, c.job.share, c.job.instance_type)] += c.job.count
    return added


def _lines_after(
    problem: QuotaProblem, admitted: set[str], stopped: set[str]
) -> dict[tuple[str, str], list[Job]]:
    """Each share's line after the tick: preempted jobs are back at their original place."""
    lines: dict[tuple[str, str], list[Job]] = {}
    for key, line in problem.lines.items():
        after = [j for j in line if j.id not in admitted and j.id not in problem.failures]
        after += [j for j in problem.jobs if j.id in stopped and (j.job_queue, j.share) == key]
        lines[key] = sorted(after, key=problem.line_key)
    return lines


def _pool_usage(pool: Pool, usage: dict[UsageKey, int]) -> dict[str, int]:
    return {name: usage.get((pool.job_queue, name, pool.instance_type), 0) for name in pool.slots}


def _preempted(
    problem: QuotaProblem,
    victims: list[Holder],
    admitted: list[Candidate],
    position: dict[str, int],
) -> list[PreemptedJob]:
    # Least protected first: the order in which victims were chosen (solver.quota.cp_model).
    victims = sorted(victims, key=problem.protection, reverse=True)
    needs = _needs(problem, admitted)
    out: list[PreemptedJob] = []
    for h in victims:
        job = h.job
        pool = problem.pools[h.pool]
        slot = pool.slots[job.share]
        where = f"quota share {job.share}"
        held = f"{slot.placed} {pool.instance_type}"
        in_share = [
            c
            for c in admitted
            if slot.share.in_share_preemption
            and c.job.share == job.share
            and c.pool == h.pool
            and c.job.priority > job.priority
        ]
        beneficiary: Candidate | None = None
        if pool.over_protected or pool.placed > pool.maximum:
            reason = PreemptReason.ENVIRONMENT_LIMIT
            message = (
                f"service environment {pool.environment} allows {pool.maximum}"
                f" {pool.instance_type} and its job queue held {pool.placed}"
            )
        elif in_share:
            reason = PreemptReason.IN_SHARE
            beneficiary = in_share[0]
            message = (
                f"job {beneficiary.job.id} of {where} has priority {beneficiary.job.priority},"
                f" above this job's {job.priority}, and the share has in-share preemption on"
            )
        else:
            beneficiary = _claimant(admitted, needs, h)
            for_whom = (
                f"; job {beneficiary.job.id} of quota share {beneficiary.job.share} needed it"
                if beneficiary
                else "; the capacity it used is no longer idle and lendable"
            )
            if slot.share.strategy.borrows and slot.placed <= slot.cap:
                reason = PreemptReason.RECLAIM
                message = f"{where} was borrowing ({held}, limit {slot.limit}){for_whom}"
            else:
                reason = PreemptReason.OVER_LIMIT
                message = (
                    f"{where} holds {held}, above its capacity limit of {slot.limit}"
                    f" (strategy {slot.share.strategy}){for_whom}"
                )
        out.append(
            PreemptedJob(
                job=job.id,
                job_queue=job.job_queue,
                share=job.share,
                instance_type=job.instance_type,
                count=job.count,
                reason=reason,
                beneficiary=beneficiary.job.id if beneficiary else None,
                message=message,
                position=position[job.id],
            )
        )
    return out


def _needs(problem: QuotaProblem, admitted: list[Candidate]) -> dict[str, int]:
    """Instances each admission needed freed: what it got beyond capacity free anyway.

    Free capacity (idle with every holder in place) goes to admissions in admission order;
    this only names beneficiaries, the model decided who runs and who stops.
    """
    free = {key: _idle(pool, {}) for key, pool in problem.pools.items()}
    needs: dict[str, int] = {}
    for c in admitted:
        taken = min(free[c.pool], c.job.count)
        free[c.pool] -= taken
        needs[c.job.id] = c.job.count - taken
    return needs


def _claimant(admitted: list[Candidate], needs: dict[str, int], victim: Holder) -> Candidate | None:
    """The earliest admission of another share in the same pool that still needs room."""
    for c in admitted:
        if c.pool == victim.pool and c.job.share != victim.job.share and needs[c.job.id] > 0:
            needs[c.job.id] = max(0, needs[c.job.id] - victim.job.count)
            return c
    return None


def _waiting(
    problem: QuotaProblem,
    decision: Decision,
    usage: dict[UsageKey, int],
    added: dict[UsageKey, int],
    position: dict[str, int],
    *,
    limit_hit: bool,
) -> list[WaitingJob]:
    out: list[WaitingJob] = []
    for line in problem.lines.values():
        for job in line:
            if job.id in decision.admitted or job.id in problem.failures:
                continue
            reason, message = _wait_reason(problem, job, usage, added, limit_hit=limit_hit)
            out.append(
                WaitingJob(
                    job=job.id,
                    job_queue=job.job_queue,
                    share=job.share,
                    reason=reason,
                    message=message,
                    position=position[job.id],
                )
            )
    return out


def _wait_reason(
    problem: QuotaProblem,
    job: Job,
    usage: dict[UsageKey, int],
    admitted: dict[UsageKey, int],
    *,
    limit_hit: bool,
) -> tuple[JobWaitReason, str]:
    status = problem.statuses[job.job_queue]
    if not status.ready:
        why = status.reason if status.status is QueueStatus.INVALID else "it is DISABLED"
        return JobWaitReason.JOB_QUEUE_NOT_READY, f"job queue {job.job_queue}: {why}"
    pool = problem.pools[(job.job_queue, job.instance_type)]
    if pool.over_protected:
        return JobWaitReason.ENVIRONMENT_FULL, (
            f"service environment {pool.environment} allows {pool.maximum}"
            f" {pool.instance_type}, less than its shares hold within their limits;"
            " nothing new starts on it this tick"
        )
    if limit_hit:
        return JobWaitReason.SOLVER_LIMIT, "the tick's time limit ran out before it was decided"
    held = _pool_usage(pool, usage)
    added = _pool_usage(pool, admitted)
    slot = pool.slots[job.share]
    share, used, t = slot.share, held[job.share], pool.instance_type
    where = f"quota share {share.name}"
    if used + job.count <= slot.limit:
        # What others hold within their own limits stays theirs this tick (solver.quota.cp_model).
        charged = {n: max(u, pool.slots[n].protected) for n, u in held.items()}
        free = pool.maximum - sum(charged.values())
        return JobWaitReason.ENVIRONMENT_FULL, (
            f"{where} has {slot.limit - used} of its {slot.limit} {t} free, but service"
            f" environment {pool.environment} has {max(0, free)} of {pool.maximum} free"
        )
    if not share.strategy.borrows:
        return JobWaitReason.SHARE_LIMIT, (
            f"{where} holds {used} of its {slot.limit} {t} and needs {job.count} more;"
            f" strategy {share.strategy} does not borrow{_in_share_note(share, job, problem)}"
        )
    if used + job.count > slot.cap:
        return JobWaitReason.BORROW_LIMIT, (
            f"{where} holds {used} {t}; {job.count} more would pass its limit of {slot.limit}"
            f" plus borrow limit ({slot.cap} in all)"
        )
    return JobWaitReason.NO_IDLE_CAPACITY, (
        f"{where} would borrow {used + job.count - slot.limit} {t}; {_idle(pool, added)} {t}"
        " are idle and lendable with every running job in place (borrowing never preempts)"
    )


def _idle(pool: Pool, added: dict[str, int]) -> int:
    """Idle lendable capacity with every holder of the tick's start in place plus `added`."""
    undisturbed = {n: s.placed + added.get(n, 0) for n, s in pool.slots.items()}
    env_free = pool.maximum - sum(undisturbed.values())
    return max(0, min(env_free, pool.lendable - pool.sharing_load(undisturbed)))


def _in_share_note(share: QuotaShare, job: Job, problem: QuotaProblem) -> str:
    lower = any(
        h.job.share == share.name
        and h.job.job_queue == job.job_queue
        and h.job.instance_type == job.instance_type
        and h.job.priority < job.priority
        for h in problem.holders
    )
    if lower and not share.in_share_preemption:
        return "; lower-priority jobs of the share run, and in-share preemption is off"
    return ""


def _job_queue_usage(
    problem: QuotaProblem,
    usage: dict[UsageKey, int],
    lines: dict[tuple[str, str], list[Job]],
) -> dict[str, JobQueueUsage]:
    out: dict[str, JobQueueUsage] = {}
    for name, queue in problem.job_queues.items():
        environment = problem.environments[queue.service_environment]
        types = sorted(set(environment.capacity_limits) | {t for (q, _, t) in usage if q == name})
        shares = {
            s.name: ShareUsage(
                name=s.name,
                strategy=s.strategy,
                capacity_limits=dict(s.capacity_limits),
                borrow_limit=s.borrow_limit,
                in_share_preemption=s.in_share_preemption,
                usage={},
                borrowed={},
                lent={},
                line=[j.id for j in lines[(name, s.name)]],
            )
            for s in queue.quota_shares
        }
        totals: dict[str, int] = {}
        unassigned_used: dict[str, int] = {}
        for t in types:
            held = {s: usage.get((name, s, t), 0) for s in shares}
            limits = {s.name: s.capacity_limits.get(t, 0) for s in queue.quota_shares}
            lent, from_unassigned = _lent(
                queue.quota_shares, limits, held, environment.capacity_limits.get(t, 0)
            )
            totals[t] = sum(held.values())
            unassigned_used[t] = from_unassigned
            for s, row in shares.items():
                if held[s] or limits[s]:
                    row.usage[t] = held[s]
                    row.borrowed[t] = max(0, held[s] - limits[s])
                    row.lent[t] = lent[s]
        out[name] = JobQueueUsage(
            name=name,
            status=problem.statuses[name],
            service_environment=environment.name,
            max_capacity=dict(environment.capacity_limits),
            usage=totals,
            unassigned_used=unassigned_used,
            shares=shares,
        )
    return out


def _lent(
    shares: list[QuotaShare], limits: dict[str, int], held: dict[str, int], maximum: int
) -> tuple[dict[str, int], int]:
    """Who lends what is borrowed: unassigned capacity first, then lenders in declaration order.

    Use beyond limits is fungible, so which idle limit covers it is a convention; drawing on
    capacity no share is given first means a share shows "lent" only when its own limit is
    actually in someone else's use.
    """
    borrowed = sum(max(0, held[s] - limits[s]) for s in held)
    from_unassigned = min(borrowed, max(0, maximum - sum(limits.values())))
    left = borrowed - from_unassigned
    lent: dict[str, int] = {}
    for share in shares:
        idle = max(0, limits[share.name] - held[share.name]) if share.strategy.lends else 0
        lent[share.name] = min(left, idle)
        left -= lent[share.name]
    return lent, from_unassigned
