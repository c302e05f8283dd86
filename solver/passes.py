"""The best-fit pass: walk the line once, admitting what fits caps and a best-fit placement.

Its refusals for caps and concurrency are exact; a refusal for room is only a
candidate ("contested") for the model in solver.decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.result import WaitReason
from solver.failfast import Failure, describe_item
from solver.plan import Plan, Refusal
from solver.problem import ActionInfo, Problem


@dataclass
class Outcome:
    """Per-action verdicts of a pass: refusals for the ones not admitted, and which to contest."""

    refusals: dict[int, Refusal] = field(default_factory=dict)
    contested: list[int] = field(default_factory=list)
    heads: dict[int, int] = field(default_factory=dict)  # queue -> the action blocking it


def best_fit_pass(
    problem: Problem,
    plan: Plan,
    failures: dict[int, Failure],
    over_depth: set[int],
    decided: dict[int, Refusal | None],
    start: int = 0,
) -> Outcome:
    """Walk the line from `start`, admitting what fits the caps and a best-fit placement.

    `decided` holds verdicts already proven (None: admitted and already in `plan`);
    they are kept as they are and still block strict queues.
    """
    outcome = Outcome()
    for action in problem.actions[start:]:
        i = action.index
        if i in failures:
            continue
        queue = problem.queues[action.queue]
        if i in decided:
            verdict = decided[i]
            if verdict is not None:
                outcome.refusals[i] = verdict
                if queue.strict:
                    outcome.heads.setdefault(action.queue, i)
            continue
        if i in over_depth:
            outcome.refusals[i] = Refusal(
                WaitReason.DEPTH, f"queue {queue.name} holds at most {queue.depth} actions"
            )
            continue
        head = outcome.heads.get(action.queue)
        if head is not None:
            outcome.refusals[i] = behind_head(problem, head)
            continue
        refusal = plan.refusal(action)
        if refusal is None:
            if plan.items_to_place(action):
                placement = plan.find_placement(action)
                if placement is not None:
                    plan.admit(action, placement)
                    continue
                refusal = room_refusal(problem, action, plan)
                outcome.contested.append(i)
            else:
                plan.admit(action, None)
                continue
        elif placement_may_lift(problem, plan, action, refusal):
            outcome.contested.append(i)
        outcome.refusals[i] = refusal
        if queue.strict:
            outcome.heads[action.queue] = i
    return outcome


def behind_head(problem: Problem, head: int) -> Refusal:
    action = problem.actions[head]
    queue = problem.queues[action.queue]
    return Refusal(
        WaitReason.HEAD_OF_LINE,
        f"behind {action.id} at the head of strict_fifo queue {queue.name}",
    )


def room_refusal(problem: Problem, action: ActionInfo, plan: Plan) -> Refusal:
    items = plan.items_to_place(action)
    clusters = plan.candidate_clusters(items, action.queue)
    names = ", ".join(problem.cluster_names[c] for c in clusters) or "none"
    what = "; ".join(describe_item(item, problem.dims) for item in items)
    empty = Plan(problem)
    if empty.find_placement(action) is not None:
        higher = {
            problem.queues[problem.actions[j].queue].name
            for j in plan.admitted
            if problem.queues[problem.actions[j].queue].priority
            > problem.queues[action.queue].priority
        }
        if higher:
            return Refusal(
                WaitReason.LOWER_PRIORITY,
                f"room in clusters {names} went to higher-priority queues"
                f" {', '.join(sorted(higher))} this tick; needs {what}",
            )
    return Refusal(WaitReason.CLUSTER_ROOM, f"no room now in clusters {names} for {what}")


def placement_may_lift(problem: Problem, plan: Plan, action: ActionInfo, refusal: Refusal) -> bool:
    """A device cap charged by untyped GPUs placed this tick may clear if they move elsewhere."""
    if refusal.reason is not WaitReason.QUEUE_CAP or refusal.resource is None:
        return False
    for j, placement in plan.admitted.items():
        other = problem.actions[j]
        if other.queue != action.queue or placement is None:
            continue
        for item, (p, _) in zip(
            plan.items_to_place(other) or other.items, placement.spots, strict=False
        ):
            if item.untyped and problem.pools[p].device == refusal.resource:
                return True
    for env_index, placement in plan.env_started.items():
        env = problem.envs[env_index]
        if env.queue != action.queue:
            continue
        for item, (p, _) in zip(env.items, placement.spots, strict=True):
            if item.untyped and problem.pools[p].device == refusal.resource:
                return True
    return False


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
