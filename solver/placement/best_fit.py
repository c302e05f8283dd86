"""The best-fit pass: walk the line once, admitting what fits caps and a best-fit placement.

Its refusals for caps and concurrency are exact; a refusal for room is only a
candidate ("contested") for the model in solver.placement.decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.result import WaitReason
from solver.placement.failfast import Failure
from solver.placement.plan import Plan, Refusal
from solver.placement.problem import ActionInfo, Problem

# Why there was no room (cluster full, or taken by higher priority) is only worked out for
# the actions still waiting at the end of the tick, against the final plan
# (solver.placement.decode).
NO_ROOM = Refusal(WaitReason.CLUSTER_ROOM, "")


@dataclass
class PassVerdicts:
    """Per-action verdicts of a pass: refusals for the ones not admitted, and which to contest."""

    refusals: dict[int, Refusal] = field(default_factory=dict)
    contested: list[int] = field(default_factory=list)
    heads: dict[int, int] = field(default_factory=dict)  # queue -> the action blocking it


def best_fit_pass(
    problem: Problem,
    plan: Plan,
    failures: dict[int, Failure],
    over_depth: set[int],
) -> PassVerdicts:
    """Walk the line, admitting into `plan` what fits the caps and a best-fit placement."""
    outcome = PassVerdicts()
    for action in problem.actions:
        if action.index in failures:
            continue
        refusal = _admit_or_refuse(problem, plan, over_depth, outcome, action)
        if refusal is not None:
            outcome.refusals[action.index] = refusal
    return outcome


def _admit_or_refuse(
    problem: Problem, plan: Plan, over_depth: set[int], outcome: PassVerdicts, action: ActionInfo
) -> Refusal | None:
    """Admit `action` into `plan` when it fits now; otherwise say why not."""
    queue = problem.queues[action.queue]
    if action.index in over_depth:
        return Refusal(WaitReason.DEPTH, f"queue {queue.name} holds at most {queue.depth} actions")
    head = outcome.heads.get(action.queue)
    if head is not None:
        return behind_head(problem, head)
    refusal = plan.refusal(action)
    if refusal is None:
        items = plan.items_to_place(action)
        if not items:
            plan.admit(action, None)
            return None
        if not plan.fleet_may_hold(items):
            refusal = NO_ROOM  # proven: no repacking of this tick's work can make the room
        else:
            placement = plan.find_placement(action)
            if placement is not None:
                plan.admit(action, placement)
                return None
            refusal = NO_ROOM
            outcome.contested.append(action.index)
    elif placement_may_lift(plan, action, refusal):
        outcome.contested.append(action.index)
    if queue.strict:
        outcome.heads[action.queue] = action.index
    return refusal


def behind_head(problem: Problem, head: int) -> Refusal:
    action = problem.actions[head]
    queue = problem.queues[action.queue]
    return Refusal(
        WaitReason.HEAD_OF_LINE,
        f"behind {action.id} at the head of strict_fifo queue {queue.name}",
    )


def placement_may_lift(plan: Plan, action: ActionInfo, refusal: Refusal) -> bool:
    """A device cap charged by untyped GPUs placed this tick may clear if they move elsewhere."""
    if refusal.reason is not WaitReason.QUEUE_CAP or refusal.resource is None:
        return False
    return plan.untyped_landed(action.queue, refusal.resource) > 0


def over_depth(problem: Problem, failures: dict[int, Failure]) -> set[int]:
    """Actions past their queue's depth, counting running work first, then the line in order."""
    seen = [q.running for q in problem.queues]
    over = set()
    for action in problem.actions:
        if action.index in failures:
            continue
        depth = problem.queues[action.queue].depth
        if depth is not None and seen[action.queue] >= depth:
            over.add(action.index)
        seen[action.queue] += 1
    return over


def strict_heads(problem: Problem, refusals: dict[int, Refusal]) -> dict[int, int]:
    """Each strict queue's first refused action: the head that blocks its line."""
    heads: dict[int, int] = {}
    for i in sorted(refusals):
        queue = problem.actions[i].queue
        if problem.queues[queue].strict:
            heads.setdefault(queue, i)
    return heads
