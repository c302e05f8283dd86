"""The tick's result models are built without validation (D240): they must be what validation
would have made, and each must stay its own when one is changed."""

from pathlib import Path

import pytest

from models.arrow.tables import read_snapshot
from models.result import ScheduledAction, WaitingAction
from models.scenario import load_scenario
from solver import tick

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
# Gangs of several containers scheduled and others waiting; actions joining a running pool.
SEEDS = ["gang-vs-stream-strict-freed", "warm-pool-running"]


@pytest.mark.parametrize("seed", SEEDS)
def test_scheduled_and_waiting_actions_equal_their_validated_copies(seed: str) -> None:
    result = tick(load_scenario(FIXTURES / "seeds" / f"{seed}.yaml"))
    assert result.scheduled and result.waiting
    for model in [*result.scheduled, *result.waiting]:
        validated = type(model).model_validate(model.model_dump())
        assert validated == model
        assert model.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
        assert model.model_dump_json() == validated.model_dump_json()


def test_changing_one_result_model_leaves_the_others_as_they_were() -> None:
    result = tick(load_scenario(FIXTURES / "seeds" / "gang-vs-stream-strict-freed.yaml"))
    first: WaitingAction = result.waiting[0]
    others = [w.model_dump(exclude_unset=True) for w in result.waiting[1:]]
    first.message = "changed"
    assert [w.model_dump(exclude_unset=True) for w in result.waiting[1:]] == others
    scheduled: ScheduledAction = result.scheduled[0]
    placed = [c.model_dump() for c in scheduled.containers[1:]]
    scheduled.containers[0].node = 99
    assert [c.model_dump() for c in scheduled.containers[1:]] == placed


def test_actions_read_from_arrow_with_equal_containers_change_one_at_a_time() -> None:
    snapshot = read_snapshot(FIXTURES / "realistic-snapshot")
    first = next(a for a in snapshot.actions if a.containers)
    shared = first.containers[0].model_dump()
    changed = first.model_copy(
        update={"containers": [first.containers[0].model_copy(update={"name": "other"})]}
    )
    assert changed.containers[0].name == "other"
    assert first.containers[0].model_dump() == shared
    assert all(c.name != "other" for a in snapshot.actions for c in a.containers)
