"""The best-fit pass: walk the line once, admitting what fits caps and a best-fit placement.

Its refusals for caps and concurrency are exact; a refusal for room is only a
candidate ("contested") for the model in solver.placement.decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.resources import EMPTY, ResourceVector
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
    """Walk the line, admitting into `plan` what fits the caps and a best-fit placement.

    For each action in order: past its queue's depth, or behind its strict queue's refused
    head, it waits; a limit or a cap it breaks refuses it (contested when only a device cap
    that untyped GPUs placed this tick charge stands in its way: they may move); a request
    larger than the fleet's free room of its kinds of pool is refused for room, proven; else
    best-fit places it, or it is refused for room and contested. A strict queue's first
    refused action becomes its head. The walk runs in the compiled ledger
    (RoomLedger.walk_line); the plan then records who sits where.
    """
    outcome = PassVerdicts()
    admitted = plan.room.walk_line(
        problem.actions,
        problem.envs,
        [usage.runs for usage in plan.usage],
        failures,
        over_depth,
        outcome,
        PassWords(problem, plan),
        EMPTY,
    )
    plan.record(admitted)
    return outcome


class PassWords:
    """The refusals a pass gives, each made once: for depth, behind a head, a limit or a cap
    (in the plan's words), and for room."""

    no_room = NO_ROOM

    def __init__(self, problem: Problem, plan: Plan) -> None:
        self.problem = problem
        self.plan = plan
        self._depth: dict[int, Refusal] = {}
        self._behind: dict[int, Refusal] = {}

    def depth(self, queue_index: int) -> Refusal:
        known = self._depth.get(queue_index)
        if known is None:
            queue = self.problem.queues[queue_index]
            known = self._depth[queue_index] = Refusal(
                WaitReason.DEPTH, f"queue {queue.name} holds at most {queue.depth} actions"
            )
        return known

    def behind(self, head: int) -> Refusal:
        known = self._behind.get(head)
        if known is None:
            known = self._behind[head] = behind_head(self.problem, head)
        return known

    def refusal(self, queue_index: int, found: tuple[int, ...], demand: ResourceVector) -> Refusal:
        return self.plan.refusal_in_words(queue_index, found, demand)


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
