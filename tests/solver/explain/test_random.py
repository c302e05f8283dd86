"""Explanations on random small snapshots, proven by re-solving and by the brute-force oracle.

Issue 5: "Cover every reason kind on fixtures, and random instances with the brute-force
oracle from the core engine's tests." For every pending action of every instance: a
failed action's suggestions make it feasible; a waiting action's minimal set is
sufficient (with every other limit relaxed it still waits, for the engine and for the
oracle) and minimal (without any one member it runs, for both), and each suggestion
lets it run.
"""

from __future__ import annotations

import random

import pytest

from models.scenario import dump_scenario
from solver import tick
from tests.support.explain import OPTIONS, prove
from tests.support.generate import PACKING, SMALL, random_snapshot

PROFILES = {"small": (SMALL, 300), "packing": (PACKING, 100)}  # generator size, instances


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
def test_explanations_of_random_instances_are_sufficient_minimal_and_their_fixes_work(
    profile: str,
) -> None:
    size, count = PROFILES[profile]
    failures: list[str] = []
    for seed in range(count):
        snapshot = random_snapshot(random.Random(seed), size)
        result = tick(snapshot, OPTIONS)
        for action in snapshot.actions:
            if action.state.value != "queued":
                continue
            for problem in prove(snapshot, result, action.id):
                failures.append(f"seed {seed}: {problem}")
                if len(failures) == 1:
                    failures.append(dump_scenario(snapshot))
    assert failures == [], "\n".join(failures[:20])
