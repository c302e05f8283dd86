"""Quota-managed job queues, one tick: which queued jobs start, which holders are preempted.

Phases: compile (references, statuses, pools, lines, fail fast, admission order,
holders) -> build the CP-SAT model -> decide it in stages -> decode. The semantics
live in solver.quota.problem (terms), solver.quota.cp_model (constraints and the
victim rule) and docs/engine/quota-model.md.

This is separate from the capped queues' tick (solver.tick): quota-managed job
queues run on their own service environments, so the two never compete for
capacity and the lead's tick can call quota_tick on the snapshot's job queues.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from models.quota import Job, JobQueue, JobState, SchedulingPolicy, ServiceEnvironment
from models.quota_result import QuotaTickResult
from models.result import SolverInfo, SolverStatus
from solver.quota.cp_model import Decision, QuotaModel, QuotaSolveBudget
from solver.quota.decode import decode
from solver.quota.problem import compile_problem


@dataclass(frozen=True)
class QuotaOptions:
    time_limit_s: float = 5.0  # CP-SAT deterministic time for the tick
    seed: int = 0
    # A time.perf_counter() deadline after which no further solve starts (the service's
    # wall-clock guard, solver.TickOptions.wall_guard_s); None: counted work alone decides.
    wall_guard: float | None = None


def quota_tick(
    policies: Sequence[SchedulingPolicy],
    environments: Sequence[ServiceEnvironment],
    job_queues: Sequence[JobQueue],
    jobs: Sequence[Job],
    now: datetime,
    options: QuotaOptions | None = None,
) -> QuotaTickResult:
    """Decide one tick of the quota-managed job queues.

    `jobs` are the queued and capacity-holding jobs of every job queue; their order
    (with submitted_at) is their arrival order. The same input always gives the
    same result.
    """
    options = options or QuotaOptions()
    budget = QuotaSolveBudget(options.time_limit_s, options.seed, options.wall_guard)
    phases: dict[str, float] = {}
    mark = budget.started

    def lap(name: str) -> None:
        nonlocal mark
        phases[name] = time.perf_counter() - mark
        mark = time.perf_counter()

    problem = compile_problem(policies, environments, job_queues, jobs, now)
    lap("compile")
    contested = len(problem.candidates) + sum(h.eligible for h in problem.holders)
    if contested:
        model = QuotaModel(problem)
        lap("build")
        decision = model.decide(budget)
        lap("solve")
    else:
        decision = Decision(admitted=set(), kept=set())
    decoded = decode(problem, decision, limit_hit=budget.limit_hit)
    lap("decode")
    if not contested:
        status = SolverStatus.NOTHING_TO_DO
    elif budget.limit_hit or budget.wall_guard_hit:
        status = SolverStatus.LIMIT_REACHED
    else:
        status = SolverStatus.OPTIMAL
    return QuotaTickResult(
        now=now,
        scheduled=decoded.scheduled,
        preempted=decoded.preempted,
        waiting=decoded.waiting,
        failed=decoded.failed,
        job_queues=decoded.job_queues,
        solver=SolverInfo(
            status=status,
            wall_time_s=time.perf_counter() - budget.started,
            limit_hit=budget.limit_hit,
            wall_guard_hit=budget.wall_guard_hit,
            phases_s=phases,
            contested=contested,
            model_solves=decision.solves,
            largest_model_variables=decision.variables,
        ),
    )


def next_jobs(jobs: Sequence[Job], result: QuotaTickResult) -> list[Job]:
    """The jobs after a tick, in the same order: started ones SCHEDULED, preempted ones QUEUED.

    A preempted job keeps its submitted_at and its place in the input, so it is back
    in its share's line exactly where it arrived; failed jobs are gone.
    """
    started = {s.job for s in result.scheduled}
    stopped = {p.job for p in result.preempted}
    failed = {f.job for f in result.failed}
    after: list[Job] = []
    for job in jobs:
        if job.id in failed:
            continue
        if job.id in started:
            job = job.model_copy(update={"state": JobState.SCHEDULED, "started_at": result.now})
        elif job.id in stopped:
            job = job.model_copy(update={"state": JobState.QUEUED, "started_at": None})
        after.append(job)
    return after
