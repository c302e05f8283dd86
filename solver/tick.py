"""One scheduling tick, in phases: snapshot, fail fast, best-fit pass, decide, decode.

The answer is the lexicographic optimum of admissions in global order (queue
priority first, then arrival): walking the line, an action runs exactly when it
fits together with every action admitted before it. solver.placement.decide explains how
the model is kept to the few actions where that is in doubt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from models.construct import collections_deferred
from models.result import SolverInfo, SolverStatus, TickResult
from models.snapshot import Snapshot
from solver.placement.best_fit import best_fit_pass, over_depth, strict_heads
from solver.placement.decide import Decider, ModelAnswers, ModelCheckBudget
from solver.placement.decode import decode
from solver.placement.failfast import fail_fast
from solver.placement.plan import Plan
from solver.placement.problem import GPU_DIM, CompileCache, Problem, compile_snapshot
from solver.placement.resume import TickState
from solver.quota.tick import QuotaOptions, quota_tick


@dataclass(frozen=True)
class TickOptions:
    # Estimated seconds for all of a tick's model checks (see
    # solver.placement.decide.ModelCheckBudget: reproducible, and about wall seconds on this
    # machine); past it, best-fit decides the rest of the line and the result says the limit
    # was hit.
    time_limit_s: float = 2.0
    seed: int = 0
    # Wall-clock seconds from the tick's start after which no further model check starts (nor
    # quota solve): the service's guard to keep its period (api.config.ServiceSettings). Off
    # by default, so the answer depends only on counted work; a tick it cuts says so in
    # `solver.wall_guard_hit`.
    wall_guard_s: float | None = None
    # The first-fit baseline instead of the engine's answer: one walk of the line, each
    # container on the first node with room, nothing reconsidered and no model checks (what
    # a sequential admission system admits). For comparisons (`sluice replay --first-fit`);
    # the service never ticks so.
    first_fit: bool = False


def tick(
    snapshot: Snapshot, options: TickOptions | None = None, kept: CompileCache | None = None
) -> TickResult:
    """Decide one tick: which pending actions run now, where, and why the others do not.
    `kept` carries compiled work from one tick of a simulation to the next
    (solver.placement.problem.CompileCache)."""
    # A tick makes many short-lived objects and no cycles worth collecting; without this the
    # collector walks the snapshot's large object graph again and again (measured: up to 15%
    # of a 10,000-action tick). Its state is let go inside the block: freed by reference
    # counting before collections resume, it is not walked by the one that follows (D400).
    with collections_deferred():
        return _tick(snapshot, options or TickOptions(), kept, None)[0]


def tick_with_state(
    snapshot: Snapshot, options: TickOptions | None = None, kept: CompileCache | None = None
) -> tuple[TickResult, TickState]:
    """The tick, and its compiled problem and decisions to resume from
    (solver.placement.resume: explanations prove their suggestions that way), with the
    answers of its placement models, which a resumed tick meets again."""
    with collections_deferred():
        return _tick(snapshot, options or TickOptions(), kept, {})


def _tick(
    snapshot: Snapshot,
    options: TickOptions,
    kept: CompileCache | None,
    answers: ModelAnswers | None,
) -> tuple[TickResult, TickState]:
    started = time.perf_counter()
    phases: dict[str, float] = {}
    mark = started

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = now - mark
        mark = now

    problem = compile_snapshot(snapshot, kept)
    lap("snapshot")
    failures = fail_fast(problem)
    deep = over_depth(problem, failures)
    lap("fail_fast")
    plan = Plan(problem, first_fit=options.first_fit)
    outcome = best_fit_pass(problem, plan, failures, deep)
    lap("best_fit")
    guard = None if options.wall_guard_s is None else started + options.wall_guard_s
    budget = ModelCheckBudget(options.time_limit_s, options.seed, guard)
    decider = Decider(problem, failures, deep, budget, answers)
    if options.first_fit:
        refusals = outcome.refusals
    else:
        plan, refusals = decider.run(plan, outcome)
    cut_short = budget.limit_hit or budget.wall_guard_hit
    if cut_short and _gpus(problem, plan) < _gpu_ceiling(problem):
        # An answer cut short by the limit must still be no worse than plain first-fit: fewer
        # GPUs admitted, and first-fit's is kept. (A plan that fills every free GPU cannot be.)
        floor = Plan(problem, first_fit=True)
        floor_refusals = best_fit_pass(problem, floor, failures, deep).refusals
        if _gpus(problem, floor) > _gpus(problem, plan):
            plan, refusals = floor, floor_refusals
    lap("decide")
    decisions = decode(problem, plan, failures, refusals, strict_heads(problem, refusals))
    lap("decode")
    quota = None
    if snapshot.job_queues:
        # Quota-managed job queues run on their own service environments: a separate model.
        quota = quota_tick(
            snapshot.scheduling_policies,
            snapshot.service_environments,
            snapshot.job_queues,
            snapshot.jobs,
            snapshot.now,
            QuotaOptions(time_limit_s=options.time_limit_s, seed=options.seed, wall_guard=guard),
        )
        lap("quota")

    if cut_short:
        status = SolverStatus.LIMIT_REACHED
    elif decider.stats.contested:
        status = SolverStatus.OPTIMAL
    elif problem.actions:
        status = SolverStatus.GREEDY_EXACT
    else:
        status = SolverStatus.NOTHING_TO_DO
    stats = decider.stats
    solver = SolverInfo(
        status=status,
        wall_time_s=time.perf_counter() - started,
        limit_hit=budget.limit_hit,
        wall_guard_hit=budget.wall_guard_hit,
        # The decide phase's share spent building and solving models, for the benchmark's split.
        phases_s=phases | {"model_build": stats.build_s, "model_solve": stats.solve_s},
        contested=stats.contested,
        model_solves=stats.model_solves,
        largest_model_variables=stats.largest_model_variables,
        unproven_refusals=stats.unproven_refusals,
        rejected_actions=sum(problem.unrepresentable(a) is not None for a in problem.actions),
        skipped_pools=problem.skipped_pools,
    )
    result = TickResult(
        now=problem.now,
        scheduled=decisions.scheduled,
        environments_started=decisions.environments_started,
        failed=decisions.failed,
        waiting=decisions.waiting,
        queues=decisions.queues,
        quota=quota,
        solver=solver,
    )
    state = TickState(
        problem,
        failures,
        plan,
        refusals,
        answers or {},
        beyond_best_fit=decider.beyond_best_fit,
        moves={} if plan.first_fit else decider.moves,  # first-fit's plan, when kept, moved none
        no_room={} if plan.first_fit else decider.no_room,
    )
    return result, state


def _gpus(problem: Problem, plan: Plan) -> int:
    """GPUs (of any accelerator) that a plan admits: what "no worse than first-fit" compares."""
    return sum(problem.actions[i].demand.accelerators() for i in plan.admitted) + sum(
        problem.envs[e].demand.accelerators() for e in plan.env_started
    )


def _gpu_ceiling(problem: Problem) -> int:
    """No plan admits more GPUs than the fleet has free next to running work."""
    return int(
        sum(
            (pool.room[GPU_DIM] * pool.max_nodes - pool.used[:, GPU_DIM].sum())
            for pool in problem.pools
        )
    )
