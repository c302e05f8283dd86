"""Places in line, counted pair by pair against the tick's own numbers on random fleets."""

from __future__ import annotations

import random

import pytest

from models.result import TickResult
from models.snapshot import Snapshot
from solver import TickOptions, tick
from solver.placement.problem import Problem, compile_snapshot
from tests.support.generate import Size, random_snapshot

# Lines over a few queues and pools that waiting actions share and miss both; the long one
# (seed 3: 571 waiting, 523 of them with a waiting action ahead that does not compete) spans
# several of the blocks decode counts at a time.
LINE = Size(queued=40, nodes=10, clusters=3, queues=4, running=4)
LONG_LINE = Size(queued=1200, nodes=10, clusters=3, queues=6, running=4)


def _pools_wanted(problem: Problem, result: TickResult) -> dict[str, frozenset[int]]:
    """The node pools each pending action could land in, with what the tick started."""
    started = {start.environment for start in result.environments_started}
    wanted = {}
    for action in problem.actions:
        items = action.items
        if action.env is not None:
            env = problem.envs[action.env]
            items = [] if env.running or env.name in started else env.items
        wanted[action.id] = frozenset(p for item in items for p in item.all_pools.tolist())
    return wanted


@pytest.mark.parametrize(
    ("seed", "size"),
    [*((s, LINE) for s in range(20)), pytest.param(3, LONG_LINE, marks=pytest.mark.slow)],
)
def test_ahead_competing_counts_every_earlier_waiting_action_of_its_queue_or_pools(
    seed: int, size: Size
) -> None:
    """Queues seed, part 6: a waiting action shows "how many actions ahead of it could take the
    capacity it needs": those waiting ahead of it in the same queue or on one of its pools."""
    snapshot: Snapshot = random_snapshot(random.Random(seed), size)
    result = tick(snapshot, TickOptions(time_limit_s=0.5))
    problem = compile_snapshot(snapshot)
    queue_of = {action.id: action.queue for action in problem.actions}
    wanted = _pools_wanted(problem, result)
    in_queue: dict[int, int] = {}
    for k, entry in enumerate(result.waiting):
        mine = entry.action
        ahead = sum(
            1
            for other in result.waiting[:k]
            if queue_of[other.action] == queue_of[mine] or wanted[other.action] & wanted[mine]
        )
        in_queue[queue_of[mine]] = in_queue.get(queue_of[mine], 0) + 1
        assert (entry.global_position, entry.queue_position, entry.ahead_competing) == (
            k + 1,
            in_queue[queue_of[mine]],
            ahead,
        )
