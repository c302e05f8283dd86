"""Explanations on random small snapshots, proven by re-solving and by the brute-force oracle.

Issue 5: "Cover every reason kind on fixtures, and random instances with the brute-force
oracle from the core engine's tests." For every pending action of every instance: a
failed action's suggestions make it feasible; a waiting action's minimal set is
sufficient (with every other limit relaxed it still waits, for the engine and for the
oracle) and minimal (without any one member it runs, for both), and each suggestion
lets it run.

Issue 18: "A randomized test (hundreds of small fleets, every waiting and failed action)
applies each offered suggestion, re-runs the full tick, and finds the action scheduled
every time." `prove` re-runs the whole tick on the whole snapshot with each suggestion
applied; the quick test does only that, on a few fleets of up to a dozen actions.
"""

from __future__ import annotations

import random

import pytest

from models.explanation import ExplanationState
from models.scenario import dump_scenario
from models.snapshot import Snapshot
from solver import tick
from solver.explain.action import explain
from tests.support.explain import OPTIONS, fixes_work, prove
from tests.support.generate import DOZEN, PACKING, SMALL, random_snapshot

PROFILES = {"small": (SMALL, 300), "dozen": (DOZEN, 600), "packing": (PACKING, 100)}
QUICK = {"small": (SMALL, 12), "dozen": (DOZEN, 12)}  # generator size, instances


def _queued(snapshot: Snapshot) -> list[str]:
    return [a.id for a in snapshot.actions if a.state.value == "queued"]


def _seeds(request: pytest.FixtureRequest, count: int) -> range:
    """CI's seeds, or those `--random-seeds FIRST:STOP` asks for (a sweep past CI's)."""
    asked = request.config.getoption("--random-seeds")
    if asked is None:
        return range(count)
    first, _, stop = asked.partition(":")
    if not (first.isdigit() and stop.isdigit() and int(first) < int(stop)):
        raise pytest.UsageError(f"--random-seeds {asked}: expected FIRST:STOP, 0 <= FIRST < STOP")
    return range(int(first), int(stop))


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
def test_explanations_of_random_instances_are_sufficient_minimal_and_their_fixes_work(
    profile: str, request: pytest.FixtureRequest
) -> None:
    size, count = PROFILES[profile]
    failures: list[str] = []
    for seed in _seeds(request, count):
        snapshot = random_snapshot(random.Random(seed), size)
        result = tick(snapshot, OPTIONS)
        for action in _queued(snapshot):
            for problem in prove(snapshot, result, action):
                failures.append(f"seed {seed}: {problem}")
                if len(failures) == 1:
                    failures.append(dump_scenario(snapshot))
    assert failures == [], "\n".join(failures[:20])


@pytest.mark.parametrize("profile", QUICK)
def test_every_offered_fix_of_a_few_random_fleets_works_on_the_whole_tick(profile: str) -> None:
    size, count = QUICK[profile]
    failures: list[str] = []
    offered = 0
    for seed in range(count):
        snapshot = random_snapshot(random.Random(seed), size)
        result = tick(snapshot, OPTIONS)
        for action in _queued(snapshot):
            explanation = explain(snapshot, action, result)
            if explanation.state is ExplanationState.SCHEDULED:
                continue
            offered += len(explanation.suggestions)
            failures += [
                f"seed {seed}: {p}" for p in fixes_work(snapshot, result, action, explanation)
            ]
    assert failures == [], "\n".join(failures[:20])
    assert offered > count  # the fleets are ones where fixes are offered at all
