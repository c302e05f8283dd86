"""Proofs for explanations: re-solve with each suggestion applied, and with each limit relaxed.

Issue 5: "Explanations are checked, not just printed: tests apply each suggested change
and re-solve to show the action then runs; for minimal sets, tests drop each member
and show the action then fits."

Issue 18: "The tests that apply every suggestion and re-solve must re-solve the whole tick
too." Each suggestion is applied to the whole snapshot and the whole tick re-run: a
waiting action is then scheduled; a failed one no longer fails, and is scheduled unless the
suggestion says the tick keeps it waiting.

A waiting action's minimal set is judged in `proof_snapshot`: everything ahead of it fixed
as the tick decided it, so `tick` re-decides only this action. A minimal set is proved by relaxing
every limit outside it (the action must still wait: the set is sufficient) and then
each member as well (the action must run: no member is superfluous). Where the
brute-force oracle can judge (caps, concurrency and room, not the line rules), it
judges too, with no engine code involved.
"""

from __future__ import annotations

from models.explanation import Change, ChangeKind, Explanation, ExplanationState, ReasonKind
from models.result import TickResult
from models.snapshot import Scheduling, Snapshot
from solver import TickOptions, tick
from solver.explain.action import explain
from solver.explain.changes import apply_changes
from solver.explain.core_model import Assumption, ExplainModel, Limit
from solver.explain.frozen import HOLD_ENVIRONMENT, freeze, global_order, proof_snapshot
from tests.support.oracle import Oracle

OPTIONS = TickOptions(time_limit_s=5.0)
WAITS_AFTER_FIX = "keeps it waiting for now"  # a failed action's fix that makes it only wait

ROOM_KINDS = {ReasonKind.CLUSTER_ROOM, ReasonKind.NODE_FIT, ReasonKind.LOWER_PRIORITY}
KIND_OF_LIMIT = {
    Limit.DEPTH: {ReasonKind.DEPTH},
    Limit.HEAD: {ReasonKind.HEAD_OF_LINE},
    Limit.RUN: {ReasonKind.RUN_CONCURRENCY},
    Limit.ACTION: {ReasonKind.ACTION_CONCURRENCY},
    Limit.CAP: {ReasonKind.QUEUE_CAP},
    Limit.DEVICE: {ReasonKind.DEVICE_CAP},
    Limit.UNTYPED: {ReasonKind.UNTYPED_GPU_CAP},
    Limit.ROOM: ROOM_KINDS,
}


def scheduled(snapshot: Snapshot, action_id: str) -> bool:
    return any(s.action == action_id for s in tick(snapshot, OPTIONS).scheduled)


def relaxation(model: ExplainModel, assumption: Assumption) -> list[Change]:
    """The snapshot change that lifts one limit of the model for this action."""
    queue = model.queue.name
    subject = assumption.subject
    match assumption.limit:
        case Limit.DEPTH:
            return [Change(kind=ChangeKind.RAISE_LIMIT, queue=queue, resource="depth")]
        case Limit.HEAD:
            return [
                Change(
                    kind=ChangeKind.SWITCH_POLICY,
                    queue=queue,
                    value=Scheduling.GREEDY_CAPACITY.value,
                )
            ]
        case Limit.RUN:
            return [Change(kind=ChangeKind.RAISE_LIMIT, queue=queue, resource="run_concurrency")]
        case Limit.ACTION:
            return [Change(kind=ChangeKind.RAISE_LIMIT, queue=queue, resource="action_concurrency")]
        case Limit.CAP | Limit.DEVICE | Limit.UNTYPED:
            return [Change(kind=ChangeKind.RAISE_CAP, queue=queue, resource=str(subject))]
        case Limit.ROOM:
            pool = model.problem.pools[int(subject)]  # type: ignore[arg-type]
            return [
                Change(
                    kind=ChangeKind.ADD_NODES,
                    cluster=model.problem.cluster_names[pool.cluster],
                    node_pool=pool.name,
                    amount=len(model.items),
                )
            ]
    raise ValueError(assumption.limit)


def relaxed(
    proof: Snapshot, action_id: str, model: ExplainModel, kept: list[Assumption]
) -> Snapshot:
    changes = [
        change
        for assumption in model.assumptions
        if assumption not in kept
        for change in relaxation(model, assumption)
    ]
    return apply_changes(proof, action_id, changes)


def oracle_places(world: Snapshot, action_id: str) -> bool:
    """The oracle's word: can the action be placed next to the world's running work, under
    its queue's caps and concurrency? (Line rules are not the oracle's to judge here.)"""
    actions = [a for a in world.actions if a.state.value == "running" or a.id == action_id]
    environments = [e for e in world.environments if e.name != HOLD_ENVIRONMENT]
    without_head = world.model_copy(update={"actions": actions, "environments": environments})
    oracle = Oracle(without_head)
    action = next(a for a in without_head.actions if a.id == action_id)
    return oracle.placeable([oracle.payload(action, started=set())], empty=False)


def prove(snapshot: Snapshot, result: TickResult, action_id: str) -> list[str]:
    """Everything wrong with the explanation of `action_id`, in words (empty: all proven)."""
    explanation = explain(snapshot, action_id, result)
    if explanation.state is ExplanationState.FAILED:
        return _prove_failed(snapshot, result, action_id, explanation)
    if explanation.state is ExplanationState.WAITING:
        return _prove_waiting(snapshot, result, action_id, explanation)
    return []


def _prove_failed(
    snapshot: Snapshot, result: TickResult, action_id: str, explanation: Explanation
) -> list[str]:
    found = []
    if explanation.code == "INFEASIBLE":
        if not explanation.items:
            found.append(f"{action_id}: failed INFEASIBLE without a reason")
        if not explanation.suggestions and not explanation.ruled_out:
            found.append(f"{action_id}: failed INFEASIBLE without a suggestion or a fix ruled out")
    return found + fixes_work(snapshot, result, action_id, explanation)


def fixes_work(
    snapshot: Snapshot, result: TickResult, action_id: str, explanation: Explanation
) -> list[str]:
    """Each suggestion applied to the whole snapshot, the whole tick re-run: a waiting action
    is scheduled; a failed one no longer fails, and is scheduled unless the suggestion says
    the tick keeps it waiting; and every action ahead of it in the changed line that
    `result` schedules is scheduled still (work a wait says finishes is not in that line)."""
    found = []
    now = {s.action for s in result.scheduled}
    for suggestion in explanation.suggestions:
        changed = apply_changes(snapshot, action_id, suggestion.changes)
        outcome = tick(changed, OPTIONS)
        runs = any(s.action == action_id for s in outcome.scheduled)
        # Ahead of it in the changed line: routed to another queue, it may move up.
        line = [a.id for a in global_order(changed)]
        after = {s.action for s in outcome.scheduled}
        lost = [a for a in line[: line.index(action_id)] if a in now and a not in after]
        if lost:
            found.append(
                f"{action_id}: {lost}, scheduled now, are not after {suggestion.message!r}"
            )
        if explanation.state is ExplanationState.WAITING:
            if not runs:
                found.append(
                    f"{action_id}: the whole tick leaves it out after {suggestion.message!r}"
                )
        elif any(f.action == action_id for f in outcome.failed):
            found.append(f"{action_id}: still fails after {suggestion.message!r}")
        elif WAITS_AFTER_FIX not in suggestion.message and not runs:
            found.append(f"{action_id}: not scheduled after {suggestion.message!r}")
    return found


def _prove_waiting(
    snapshot: Snapshot, result: TickResult, action_id: str, explanation: Explanation
) -> list[str]:
    found: list[str] = []
    proof = proof_snapshot(snapshot, action_id, result)
    model = ExplainModel(freeze(snapshot, action_id, result))
    core = model.minimal_core()
    if core is None:
        kinds = [item.kind for item in explanation.items]
        if kinds not in ([ReasonKind.FITS_NOW], [ReasonKind.SOLVER_LIMIT]):
            found.append(f"{action_id}: no core, but items {kinds}")
        if not scheduled(proof, action_id):
            found.append(f"{action_id}: said to fit now, but the proof world keeps it waiting")
        return found
    if scheduled(proof, action_id):
        found.append(f"{action_id}: waits in the tick, but runs in its proof world")
    kinds = [item.kind for item in explanation.items]
    if len(kinds) != len(core) or any(
        kind not in KIND_OF_LIMIT[a.limit] for kind, a in zip(kinds, core, strict=False)
    ):
        found.append(f"{action_id}: items {kinds} do not match the core {[a.limit for a in core]}")
    found += fixes_work(snapshot, result, action_id, explanation)
    # Sufficient: with only the core's limits kept, it still waits.
    world = relaxed(proof, action_id, model, core)
    if scheduled(world, action_id):
        found.append(f"{action_id}: runs with only {[a.limit for a in core]} kept")
    if not _line_rules(core) and oracle_places(world, action_id):
        found.append(f"{action_id}: the oracle places it with only the core kept")
    # Minimal: without any one member, it runs.
    for member in core:
        rest = [a for a in core if a is not member]
        world = relaxed(proof, action_id, model, rest)
        if not scheduled(world, action_id):
            found.append(f"{action_id}: still waits without {member.limit.name} {member.subject}")
        if not _line_rules(rest) and not oracle_places(world, action_id):
            found.append(
                f"{action_id}: the oracle cannot place it without {member.limit.name}"
                f" {member.subject}"
            )
    return found


def _line_rules(kept: list[Assumption]) -> bool:
    """Depth and the head of a strict line: the engine's to judge, not the oracle's."""
    return any(a.limit in (Limit.HEAD, Limit.DEPTH) for a in kept)
