"""The service's tick compiles each snapshot with what its last tick compiled, and its
forecast with what its last forecast compiled (D451): the store hands it the same action
objects while their rows do not change, and its fleet read anew. Issue 12: "The store keeps
it up to date incrementally between ticks (an action submitted, scheduled, finished changes a
row, not the whole problem)". Whatever it keeps, each tick decides exactly as a tick
compiling the same snapshot afresh, and each forecast foresees what one compiling afresh
foresees; and an explanation that rebuilds the tick's state with what the last explanation of the
process compiled says what one compiling afresh says."""

import random
from datetime import timedelta

import pytest

from api.tick_work import ServiceForecast, SolverTick, explain_failure_kept, explain_with_text
from models.forecast import LearnedDurations
from models.result import read_result_text, result_text
from models.snapshot import Action, ActionState, Cluster, Snapshot
from solver import TickOptions, tick
from solver.explain.action import explain, explain_failure
from solver.replay.forecast import ForecastBudget, forecast
from tests.support.generate import DOZEN, random_snapshot

OPTIONS = TickOptions(time_limit_s=5.0)


def _read_again(snapshot: Snapshot, rng: random.Random, step: int) -> Snapshot:
    """The next read, as the store gives it: the clusters validated anew (equal, or one
    pool's nodes with half their CPU at step 2), unchanged actions the same objects, some
    replaced by changed copies (another request, or the same containers in a list of its
    own), some gone."""
    clusters = [Cluster.model_validate(c.model_dump()) for c in snapshot.clusters]
    if step == 2 and clusters and clusters[0].node_pools:
        pool = clusters[0].node_pools[0]
        halved = pool.node.model_copy(update={"cpu": pool.node.cpu // 2})
        resized = pool.model_copy(update={"node": halved})
        clusters[0] = clusters[0].model_copy(
            update={"node_pools": [resized, *clusters[0].node_pools[1:]]}
        )
    actions: list[Action] = []
    for action in snapshot.actions:
        roll = rng.random()
        if roll < 0.1:
            continue  # finished, or cancelled
        if roll < 0.25 and action.containers:
            first = action.containers[0]
            cpu = first.resources.get("cpu", 0) + 1000
            changed = first.model_copy(update={"resources": {**first.resources, "cpu": cpu}})
            action = action.model_copy(update={"containers": [changed, *action.containers[1:]]})
        elif roll < 0.4:
            action = action.model_copy(update={"containers": list(action.containers)})
        actions.append(action)
    return snapshot.model_copy(update={"clusters": clusters, "actions": actions})


SEEDS = [pytest.param(seed, marks=[pytest.mark.slow] if seed >= 4 else []) for seed in range(40)]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_tick_that_keeps_what_the_last_compiled_decides_as_a_fresh_one(seed: int) -> None:
    rng = random.Random(seed)
    snapshot = random_snapshot(rng, DOZEN)
    solve = SolverTick(OPTIONS)
    for step in range(4):
        kept, _ = solve(snapshot)
        fresh = tick(snapshot, OPTIONS)
        assert kept.model_dump(exclude={"solver"}) == fresh.model_dump(exclude={"solver"})
        snapshot = _read_again(snapshot, rng, step)


BUDGET = ForecastBudget(period_s=60.0, tick=TickOptions(time_limit_s=0.2))
LEARNED = LearnedDurations(by_queue={"q0": timedelta(minutes=5), "q1": timedelta(minutes=30)})


@pytest.mark.parametrize("seed", SEEDS)
def test_a_forecast_that_keeps_what_the_last_compiled_foresees_as_a_fresh_one(seed: int) -> None:
    rng = random.Random(seed)
    snapshot = random_snapshot(rng, DOZEN)
    foresee = ServiceForecast(BUDGET)
    for step in range(4):
        result = tick(snapshot, OPTIONS)
        assert foresee(snapshot, result, LEARNED) == forecast(snapshot, result, LEARNED, BUDGET)
        snapshot = _read_again(snapshot, rng, step)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_explanation_that_keeps_what_the_last_compiled_says_what_a_fresh_one_says(
    seed: int,
) -> None:
    """As the service explains: the store read as of the request, the last tick's result as
    the server keeps it (or, for an action the scheduler failed, its failure), each
    explanation after the one before in the same process."""
    rng = random.Random(seed)
    snapshot = random_snapshot(rng, DOZEN)
    for step in range(3):
        result = tick(snapshot, OPTIONS)
        last = result_text(result)
        by_id = {a.id: a for a in snapshot.actions}
        snapshot = _read_again(snapshot, rng, step)
        queued = [a.id for a in snapshot.actions if a.state is ActionState.QUEUED]
        for action in rng.sample(queued, min(3, len(queued))):
            kept = explain_with_text(snapshot, action, last, OPTIONS)
            assert kept == explain(snapshot, action, read_result_text(last), OPTIONS)
        for failed in result.failed[:2]:  # as the store keeps them: failed, out of the line
            args = (snapshot, by_id[failed.action], failed.code, failed.message, OPTIONS)
            assert explain_failure_kept(*args) == explain_failure(*args)
