"""Forecasts on one node of 4 H100s (conftest.FLEET), worked by hand.

At 00:00:30 action `a` holds all 4 GPUs; it started at 00:00:00 and is expected to run
100 s. Behind it in the strict queue wait b and c (2 GPUs each) and d (4 GPUs). The
service ticks every 60 s from 00:00:30, so the first tick after a's end (00:01:40) is at
00:02:30: b and c start there; d needs b and c both gone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from models.forecast import FinishedRun, LearnedDurations
from models.scenario import snapshot_from_dict
from models.snapshot import Snapshot
from solver.replay.forecast import ForecastBudget, forecast
from solver.tick import tick
from tests.solver.replay.conftest import FLEET

T0 = datetime(2026, 12, 1, tzinfo=UTC)
NOW = T0 + timedelta(seconds=30)
BUDGET = ForecastBudget(period_s=60)
ON_NODE = {"cluster": "c", "containers": [{"name": "main", "node_pool": "p", "node": 0}]}


def _action(id: str, gpus: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": id,
        "queue": "strict",
        "submitted_at": T0.isoformat(),
        "containers": [{"name": "main", "resources": {"cpu": "1", "gpu": f"H100:{gpus}"}}],
        **extra,
    }


def _snapshot(
    c: dict[str, Any], d: dict[str, Any], a_expected: str | None = "100s", a_started: datetime = T0
) -> Snapshot:
    running = _action(
        "a",
        4,
        state="running",
        placement=ON_NODE,
        started_at=a_started.isoformat(),
        expected_duration=a_expected,
    )
    actions = [running, _action("b", 2, expected_duration="50s"), c, d]
    return snapshot_from_dict({**FLEET, "now": NOW.isoformat(), "actions": actions})


def _forecasts(
    snapshot: Snapshot, learned: LearnedDurations | None = None, budget: ForecastBudget = BUDGET
) -> dict[str, tuple[datetime | None, str]]:
    result = tick(snapshot)
    assert {w.action for w in result.waiting} == {"b", "c", "d"}
    found = forecast(snapshot, result, learned or LearnedDurations(), budget)
    return {key: (f.estimated_start, f.assumption) for key, f in found.items()}


def test_each_waiting_action_gets_an_estimated_start_and_its_assumption() -> None:
    """ "give each waiting action an estimated start time and the assumption behind it".

    b and c start at the tick after a's expected end (00:02:30); b is expected to end at
    00:03:20 and c at 00:04:10, so d starts at the tick of 00:04:30."""
    got = _forecasts(_snapshot(_action("c", 2, expected_duration="100s"), _action("d", 4)))
    assert {key: start for key, (start, _) in got.items()} == {
        "b": NOW + timedelta(seconds=120),
        "c": NOW + timedelta(seconds=120),
        "d": NOW + timedelta(seconds=240),
    }
    assert got["b"][1] == (
        "starts once a end (the last at 2026-12-01T00:01:40+00:00, from its"
        " expected_duration), if running work ends when expected and nothing new arrives"
    )


def test_running_work_past_its_expected_end_runs_as_long_again() -> None:
    """a started 130 s before now and was expected to take 10 s: it is taken to run another
    130 s, to 00:02:40, so b and c start at the tick of 00:03:30."""
    snapshot = _snapshot(
        _action("c", 2, expected_duration="100s"),
        _action("d", 4),
        a_expected="10s",
        a_started=NOW - timedelta(seconds=130),
    )
    got = _forecasts(snapshot)
    assert got["b"][0] == NOW + timedelta(seconds=180)
    assert "from its expected_duration, overrun: as long again as it has run" in got["b"][1]


def test_unknown_when_the_work_it_waits_on_has_no_expected_end() -> None:
    """ "It says "unknown" rather than guess when running work has no expected end."

    c has no expected_duration and nothing to learn from: once it starts, d (which needs
    c's GPUs) is unknown, naming c; b and c themselves still have estimates."""
    got = _forecasts(_snapshot(_action("c", 2), _action("d", 4)))
    assert got["b"][0] == got["c"][0] == NOW + timedelta(seconds=120)
    assert got["d"] == (
        None,
        "unknown: still waiting once every running action with an expected end has ended;"
        " it waits on work with no expected end (c)",
    )


def test_a_running_action_without_an_expected_end_makes_the_line_behind_it_unknown() -> None:
    got = _forecasts(_snapshot(_action("c", 2), _action("d", 4), a_expected=None))
    assert {start for start, _ in got.values()} == {None}
    assert "no expected end (a)" in got["b"][1]


def test_run_times_learned_from_finished_work_of_the_task_else_the_queue() -> None:
    """ "learned per task or queue from finished work when the submitter gives none".

    The queue's finished runs have a median of 60 s, task `short`'s 10 s: c (of the task)
    ends at 00:02:40, so d starts with b's end at the tick of 00:03:30; without the task,
    c would run the queue's 60 s, to 00:03:30, and d start at that tick, after c's end."""
    runs = [FinishedRun("strict", "short", 10.0) for _ in range(3)]
    runs += [FinishedRun("strict", None, 60.0) for _ in range(4)]
    learned = LearnedDurations.learn(runs)
    assert learned.by_task == {"short": timedelta(seconds=10)}
    assert learned.by_queue == {"strict": timedelta(seconds=60)}
    got = _forecasts(_snapshot(_action("c", 2, task="short"), _action("d", 4)), learned)
    assert got["d"][0] == NOW + timedelta(seconds=180)
    assert "once b, c end (the last at 2026-12-01T00:03:20+00:00" in got["d"][1]
    got = _forecasts(_snapshot(_action("c", 2), _action("d", 4)), learned)
    assert got["d"][0] == NOW + timedelta(seconds=180)
    assert "from the median of queue strict's finished runs" in got["d"][1]


def test_an_action_that_would_expire_first_is_unknown_and_says_so() -> None:
    got = _forecasts(
        _snapshot(_action("c", 2, expected_duration="100s"), _action("d", 4, max_queued_time="3m"))
    )
    start, words = got["d"]
    assert start is None
    assert words.startswith(
        "unknown: expected to fail MAX_QUEUED_TIME_EXCEEDED at 2026-12-01T00:03:30+00:00"
    )


def test_the_budget_bounds_the_simulated_ticks() -> None:
    """ "Bounded budget (ticks/time simulated, deterministic work limits)": with one
    simulated tick (00:01:30, before a ends) nothing starts, and the words say why."""
    got = _forecasts(
        _snapshot(_action("c", 2, expected_duration="100s"), _action("d", 4)),
        budget=ForecastBudget(ticks=1, period_s=60),
    )
    assert got["b"] == (
        None,
        "unknown: not started within the forecast's budget (1 simulated ticks, to"
        " 2026-12-01T00:01:30+00:00; at most 1 ticks, 24,000 actions over their snapshots"
        " and 7d)",
    )


def test_the_budget_bounds_the_actions_simulated() -> None:
    """A tick's cost grows with its snapshot: with room for 7 actions over the simulated
    ticks, only the first (4 actions: a, b, c, d) is simulated, before a ends."""
    got = _forecasts(
        _snapshot(_action("c", 2, expected_duration="100s"), _action("d", 4)),
        budget=ForecastBudget(work=7, period_s=60),
    )
    assert {start for start, _ in got.values()} == {None}
    assert got["d"][1].startswith("unknown: not started within the forecast's budget (1 simulated")


def test_the_same_state_gives_the_same_forecasts() -> None:
    snapshot = _snapshot(_action("c", 2, expected_duration="100s"), _action("d", 4))
    assert _forecasts(snapshot) == _forecasts(snapshot)


def test_simulated_ticks_widen_to_reach_further_and_say_so() -> None:
    """With the spacing doubling after every simulated tick (D182): the first at 00:01:30,
    one period on; the next two periods on from there, at the first end after it (a's, at
    00:01:40), so b and c start at 00:03:30, where the ticks are 2 minutes apart; then four,
    so d (after b's end at 00:04:20 and c's at 00:05:10) starts at 00:07:30."""
    got = _forecasts(
        _snapshot(_action("c", 2, expected_duration="100s"), _action("d", 4)),
        budget=ForecastBudget(period_s=60, widening=1),
    )
    assert {key: start for key, (start, _) in got.items()} == {
        "b": NOW + timedelta(seconds=180),
        "c": NOW + timedelta(seconds=180),
        "d": NOW + timedelta(seconds=420),
    }
    assert got["b"][1].endswith(
        "; simulated ticks are 2m apart this far ahead, so it may start up to that much sooner"
    )
