"""The refusals solver.placement.bounds proves are refusals the brute-force oracle makes too.

Issue 12: "A refusal proven for a shape holds for every later action of that shape (or a
larger one) until room comes back." A bound's refusal is a proof only if no placement
exists next to the decided admissions however they are repacked, so on random small
fleets: walking the oracle's line, every action the bounds refute next to the oracle's
earlier admissions is one the oracle does not admit.
"""

from __future__ import annotations

import random

import pytest

import solver.placement.decide
from solver import TickOptions, tick
from solver.placement.bounds import RoomBounds
from solver.placement.problem import Item, compile_snapshot
from tests.solver.placement.test_oracle import Outcome, expected_outcomes
from tests.support.generate import PACKING, SMALL, Size, random_snapshot
from tests.support.oracle import decide

INSTANCES = 600  # per profile; a few seconds in all
TIGHT = Size(queued=8, nodes=3, clusters=2, queues=3, running=4)


@pytest.mark.parametrize("size", [SMALL, PACKING, TIGHT], ids=["small", "packing", "tight"])
def test_every_refusal_the_bounds_prove_the_oracle_makes(size: Size) -> None:
    refuted = 0
    for seed in range(INSTANCES):
        snapshot = random_snapshot(random.Random(seed), size)
        problem = compile_snapshot(snapshot)
        verdict = decide(snapshot)
        admitted = set(verdict.admitted)
        bounds = RoomBounds(problem)
        started: set[int] = set()
        for action in problem.actions:
            if action.id in verdict.failed:
                continue
            items = _to_place(problem.envs, action.env, action.items, started)
            if items and bounds.refutes(action.queue, items):
                refuted += 1
                assert action.id not in admitted, f"seed {seed}: {action.id} is admitted"
            if action.id in admitted:
                bounds.admit(action.queue, items)
                if action.env is not None:
                    started.add(action.env)
    # The property says something only if the bounds refuse some actions.
    assert refuted > INSTANCES // 4, refuted


def _to_place(envs: list, env: int | None, items: list[Item], started: set[int]) -> list[Item]:
    """What admitting the action places: its containers, or the replicas of the pool it
    starts (none when the pool runs or an earlier admission started it)."""
    if env is None:
        return items
    return [] if envs[env].running or env in started else envs[env].items


@pytest.mark.slow
def test_a_tick_of_local_checks_that_reports_every_refusal_proven_is_the_oracles_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # docs/engine/exactness.md: a check that lets only the action's neighbourhood move proves
    # a "no" only where the bounds or a closed neighbourhood do; then the tick is exact. With
    # every check local (as above 60 placed units), a tick reporting no unproven refusal must
    # admit what the oracle admits.
    monkeypatch.setattr(solver.placement.decide, "EXACT_NEIGHBOURHOOD_UNITS", 0)
    exact = 0
    for seed in range(INSTANCES):
        snapshot = random_snapshot(random.Random(seed), PACKING)
        result = tick(snapshot, TickOptions(time_limit_s=5.0))
        if result.solver.unproven_refusals or result.solver.limit_hit:
            continue
        exact += 1
        outcome = Outcome.of_result(result)
        assert outcome in expected_outcomes(snapshot), f"seed {seed}: {outcome}"
    assert exact > INSTANCES // 2, exact
