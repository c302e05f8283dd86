"""A quota tick's input compiled once: pools, share slots, lines, candidates, holders, failures.

A pool is one (job queue, instance type): the environment's maximum E of that type and
the shares that have a limit in it or hold instances of it. Pools never interact (a job
needs one instance type and a quota-managed environment serves one job queue), which is
what keeps the model per pool small and its constraints simple.

Terms used throughout (per share slot in a pool):
  L  its capacity limit for the type (0 when the share has none),
  R  the instances its jobs hold at the start of the tick,
  P  protected = min(R, L): what it holds within its own limit; other shares' admissions
     can never take it (only its own higher-priority jobs, or an environment lowered
     below the sum of all P),
  cap  the most it may hold after admitting a job: L for RESERVE and LEND, L plus the
     borrowable amount for LEND_AND_BORROW, never above E,
  U  (per pool) environment capacity no share is given: E - sum(L), at least 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from models.quota import (
    Job,
    JobQueue,
    JobQueueStatus,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
    check_quota_references,
    job_queue_statuses,
)

PoolKey = tuple[str, str]  # (job queue, instance type)
ShareKey = tuple[str, str]  # (job queue, share)


@dataclass
class Slot:
    """One share's stake in one pool."""

    share: QuotaShare
    limit: int
    cap: int
    placed: int = 0
    protected: int = 0

    @property
    def borrowed_before(self) -> int:
        return max(0, self.placed - self.limit)

    @property
    def over_limit(self) -> bool:
        return self.placed > self.limit


@dataclass
class Pool:
    job_queue: str
    environment: str
    instance_type: str
    maximum: int
    slots: dict[str, Slot]  # by share name, in the job queue's declaration order
    unassigned: int = 0
    # The environment's maximum is below what the shares hold within their own limits
    # (it was lowered): every holder may be preempted and nothing new starts here.
    over_protected: bool = False

    @property
    def placed(self) -> int:
        return sum(s.placed for s in self.slots.values())

    @property
    def lendable(self) -> int:
        """What use beyond own limits may draw on: lenders' limits and unassigned capacity."""
        return sum(s.limit for s in self.slots.values() if s.share.strategy.lends) + self.unassigned

    def sharing_load(self, charged: dict[str, int]) -> int:
        """Lending shares' whole use plus RESERVE shares' use beyond their limits."""
        return sum(
            u if self.slots[name].share.strategy.lends else max(0, u - self.slots[name].limit)
            for name, u in charged.items()
        )


@dataclass
class Candidate:
    """A queued job the model may admit this tick."""

    job: Job
    rank: int  # place in the global admission order
    pool: PoolKey


@dataclass
class Holder:
    """A job holding instances at the start of the tick."""

    job: Job
    pool: PoolKey
    work_lost: int  # instance-seconds it has held capacity: what preempting it throws away
    eligible: bool  # whether any preemption rule can reach it this tick
    in_share_only: bool  # eligible only because a higher-priority job of its share waits


@dataclass
class QuotaProblem:
    now: datetime
    jobs: Sequence[Job]
    job_queues: dict[str, JobQueue]
    environments: dict[str, ServiceEnvironment]
    statuses: dict[str, JobQueueStatus]
    pools: dict[PoolKey, Pool]
    lines: dict[ShareKey, list[Job]]  # queued jobs of each share, in line order
    arrival: dict[str, tuple[datetime, int]]  # job id -> (submitted_at, position in the input)
    candidates: list[Candidate] = field(default_factory=list)  # in admission order
    holders: list[Holder] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # job id -> why it can never run
    idle: list[Job] = field(default_factory=list)  # queued, not in the model (queue or pool)

    def line_key(self, job: Job) -> tuple[int, datetime, int]:
        """Priority first (higher first), then arrival: the order of a share's line."""
        submitted, position = self.arrival[job.id]
        return (-job.priority, submitted, position)

    def protection(self, holder: Holder) -> tuple[int, int, datetime, int]:
        """Most protected first: higher priority, then more work done, then earlier arrival."""
        submitted, position = self.arrival[holder.job.id]
        return (-holder.job.priority, -holder.work_lost, submitted, position)


def compile_problem(
    policies: Sequence[SchedulingPolicy],
    environments: Sequence[ServiceEnvironment],
    job_queues: Sequence[JobQueue],
    jobs: Sequence[Job],
    now: datetime,
) -> QuotaProblem:
    check_quota_references(policies, environments, job_queues, jobs)
    statuses = job_queue_statuses(policies, environments, job_queues)
    by_environment = {e.name: e for e in environments}
    queues = {q.name: q for q in job_queues}
    problem = QuotaProblem(
        now=now,
        jobs=jobs,
        job_queues=queues,
        environments=by_environment,
        statuses=statuses,
        pools={},
        lines={(q.name, s.name): [] for q in job_queues for s in q.quota_shares},
        arrival={job.id: (job.submitted_at, i) for i, job in enumerate(jobs)},
    )
    for queue in job_queues:
        if statuses[queue.name].ready:  # a queue that is not ready starts and stops nothing
            _add_pools(problem, queue, by_environment[queue.service_environment], jobs)
    _protect(problem)
    for job in jobs:
        if not job.state.holds_capacity:
            problem.lines[(job.job_queue, job.share)].append(job)
    for line in problem.lines.values():
        line.sort(key=problem.line_key)
    _fail_fast(problem)
    _rank_candidates(problem)
    _holders(problem, jobs)
    return problem


def _add_pools(
    problem: QuotaProblem, queue: JobQueue, environment: ServiceEnvironment, jobs: Sequence[Job]
) -> None:
    """One pool per instance type the environment offers or a job of the queue holds."""
    held = {j.instance_type for j in jobs if j.job_queue == queue.name and j.state.holds_capacity}
    for instance_type in sorted(set(environment.capacity_limits) | held):
        maximum = environment.capacity_limits.get(instance_type, 0)
        slots = {
            share.name: Slot(
                share=share,
                limit=(limit := share.capacity_limits.get(instance_type, 0)),
                cap=min(maximum, limit + share.borrowable(instance_type, maximum)),
            )
            for share in queue.quota_shares
        }
        problem.pools[(queue.name, instance_type)] = Pool(
            job_queue=queue.name,
            environment=environment.name,
            instance_type=instance_type,
            maximum=maximum,
            slots=slots,
            unassigned=max(0, maximum - sum(s.limit for s in slots.values())),
        )
    for job in jobs:
        if job.job_queue == queue.name and job.state.holds_capacity:
            problem.pools[(queue.name, job.instance_type)].slots[job.share].placed += job.count


def _protect(problem: QuotaProblem) -> None:
    for pool in problem.pools.values():
        for slot in pool.slots.values():
            slot.protected = min(slot.placed, slot.limit)
        if sum(s.protected for s in pool.slots.values()) > pool.maximum:
            pool.over_protected = True
            for slot in pool.slots.values():
                slot.protected = 0


def _fail_fast(problem: QuotaProblem) -> None:
    """Queued jobs no configuration of the others could ever admit fail with a reason."""
    for (queue_name, share_name), line in problem.lines.items():
        if not problem.statuses[queue_name].ready:
            continue
        share = problem.job_queues[queue_name].share(share_name)
        assert share is not None  # references are checked
        for job in line:
            message = _never_fits(problem, queue_name, share, job)
            if message is not None:
                problem.failures[job.id] = message


def _never_fits(problem: QuotaProblem, queue: str, share: QuotaShare, job: Job) -> str | None:
    asks = f"job {job.id} asks for {job.count} {job.instance_type}"
    if job.instance_type not in share.capacity_limits:
        limited = ", ".join(sorted(share.capacity_limits))
        return f"{asks}; quota share {share.name} has capacity limits for {limited} only"
    pool = problem.pools[(queue, job.instance_type)]
    if job.count > pool.maximum:
        return f"{asks}; service environment {pool.environment} has at most {pool.maximum}"
    slot = pool.slots[share.name]
    if job.count > slot.cap:
        if share.strategy.borrows:
            allowance = (
                "no borrow limit"
                if share.borrow_limit is None
                else (f"borrow limit {share.borrow_limit}%")
            )
            how = f"limit {slot.limit} and {allowance}"
        else:
            how = f"limit {slot.limit}, strategy {share.strategy} does not borrow"
        return f"{asks}; quota share {share.name} can hold at most {slot.cap} ({how})"
    return None


def _rank_candidates(problem: QuotaProblem) -> None:
    """The global admission order: shares take turns, FIFO by their longest-waiting job.

    Within a share the line is priority first, then arrival. Across shares the next
    turn goes to the share whose oldest queued job arrived first (the policy's FIFO
    idle-resource assignment), and that share spends it on the head of its line.
    """
    lines: dict[ShareKey, list[Job]] = {}
    for key, line in problem.lines.items():
        eligible = []
        for job in line:
            if job.id in problem.failures:
                continue
            pool = problem.pools.get((key[0], job.instance_type))
            if not problem.statuses[key[0]].ready or pool is None or pool.over_protected:
                problem.idle.append(job)
            else:
                eligible.append(job)
        if eligible:
            lines[key] = eligible
    arrival = problem.arrival
    by_arrival = {key: sorted(line, key=lambda j: arrival[j.id]) for key, line in lines.items()}
    taken: set[str] = set()
    heads = dict.fromkeys(lines, 0)
    oldest = dict.fromkeys(lines, 0)

    def waiting_since(key: ShareKey) -> tuple[datetime, int]:
        order = by_arrival[key]
        while order[oldest[key]].id in taken:
            oldest[key] += 1
        return arrival[order[oldest[key]].id]

    while lines:
        key = min(lines, key=waiting_since)
        job = lines[key][heads[key]]
        heads[key] += 1
        taken.add(job.id)
        problem.candidates.append(
            Candidate(job=job, rank=len(problem.candidates), pool=(key[0], job.instance_type))
        )
        if heads[key] == len(lines[key]):
            del lines[key]


def _holders(problem: QuotaProblem, jobs: Sequence[Job]) -> None:
    waiting_priorities: dict[tuple[str, str, str], int] = {}
    for c in problem.candidates:
        slot_key = (c.job.job_queue, c.job.share, c.job.instance_type)
        waiting_priorities[slot_key] = max(waiting_priorities.get(slot_key, -1), c.job.priority)
    for job in jobs:
        if not job.state.holds_capacity:
            continue
        key = (job.job_queue, job.instance_type)
        pool = problem.pools.get(key)
        if pool is None:  # its job queue is not ready: nothing moves there
            continue
        slot = pool.slots[job.share]
        higher_waits = (
            slot.share.in_share_preemption
            and waiting_priorities.get((job.job_queue, job.share, job.instance_type), -1)
            > job.priority
        )
        by_rule = pool.over_protected or slot.over_limit
        assert job.started_at is not None  # a holding job has started_at (models.quota)
        held_s = max(0, int((problem.now - job.started_at).total_seconds()))
        problem.holders.append(
            Holder(
                job=job,
                pool=key,
                work_lost=job.count * held_s,
                eligible=by_rule or higher_waits,
                in_share_only=higher_waits and not by_rule,
            )
        )
