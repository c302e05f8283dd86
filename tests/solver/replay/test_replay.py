"""Replays of tiny hand-made traces on one node of 4 H100s (conftest.fleet), worked by hand."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from models.scenario import snapshot_from_dict
from models.snapshot import Snapshot
from models.trace import TraceRow
from solver.replay.simulate import ReplayOptions, Simulation, replay
from solver.replay.summary import OVERALL, replay_tables, summarize, summary_text
from solver.tick import TickOptions, tick
from tests.solver.replay.conftest import FLEET

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _row(id: str, submit_s: float, duration_s: float, gpus: int, **extra: object) -> TraceRow:
    return TraceRow.model_validate(
        {
            "id": id,
            "queue": extra.pop("queue", "strict"),
            "submit_s": submit_s,
            "duration_s": duration_s,
            "cpu": "1",
            "memory": "1Gi",
            "gpu": f"H100:{gpus}",
            **extra,
        }
    )


def _at(seconds: float | None) -> datetime | None:
    return None if seconds is None else T0 + timedelta(seconds=seconds)


# a holds all 4 GPUs for 100 s; b and c (2 each) arrive behind it in a strict queue.
HEAD_BLOCKED = [
    _row("a", 0, 100, 4),
    _row("b", 10, 50, 2),
    _row("c", 20, 50, 2, max_queued_time_s=90),
]


def test_periodic_ticks_free_room_at_the_first_tick_after_an_end(fleet: Snapshot) -> None:
    """ "finishing actions after their duration, firing max_queued_time".

    Ticks at 0, 60, 120 s. a starts at 0. At 60 a still runs: b and c wait. a ends at 100,
    so its GPUs are free at the tick of 120: b starts there (waited 110 s); c has by then
    queued 100 s, past its max_queued_time of 90, and the engine fails it at that tick."""
    result = replay(fleet, HEAD_BLOCKED, ReplayOptions(period_s=60))
    got = {a.id: (a.started_at, a.finished_at, a.waited_s, a.outcome) for a in result.actions}
    assert got == {
        "a": (_at(0), _at(100), 0.0, "succeeded"),
        "b": (_at(120), _at(170), 110.0, "succeeded"),
        "c": (None, _at(120), 100.0, "MAX_QUEUED_TIME_EXCEEDED"),
    }
    assert [t.time for t in result.ticks] == [_at(s) for s in (0, 60, 120, 180)]
    assert [t.head_blocked for t in result.ticks] == [(), ("strict",), (), ()]
    assert [t.gpu_allocated for t in result.ticks] == [4, 4, 2, 0]


def test_event_driven_ticks_at_each_arrival_and_end(fleet: Snapshot) -> None:
    """ "event-driven: a tick on each arrival/finish batch".

    Ticks at 0 (a), 10 (b), 20 (c) and 100 (a ends): b and c start together at 100, when
    c has waited 80 s, inside its 90; nothing fails."""
    result = replay(fleet, HEAD_BLOCKED, ReplayOptions(event_driven=True))
    got = {a.id: (a.started_at, a.waited_s, a.outcome) for a in result.actions}
    assert got == {
        "a": (_at(0), 0.0, "succeeded"),
        "b": (_at(100), 90.0, "succeeded"),
        "c": (_at(100), 80.0, "succeeded"),
    }
    assert [t.time for t in result.ticks] == [_at(s) for s in (0, 10, 20, 100, 150)]


def test_a_deadline_stops_running_work(fleet: Snapshot) -> None:
    """A running action whose deadline comes before its end stops there, failing
    DEADLINE_EXCEEDED (as the service stops it); one queued past its deadline is failed by
    the engine: d waits behind a (which holds every GPU until 100) and its deadline is 30."""
    trace = [_row("a", 0, 100, 4, deadline_s=40), _row("d", 0, 10, 1, deadline_s=30)]
    result = replay(fleet, trace, ReplayOptions(event_driven=True))
    got = {a.id: (a.started_at, a.finished_at, a.outcome) for a in result.actions}
    assert got == {
        "a": (_at(0), _at(40), "DEADLINE_EXCEEDED"),
        "d": (None, _at(30), "DEADLINE_EXCEEDED"),
    }


def test_an_idle_stretch_is_skipped_on_the_period_grid(fleet: Snapshot) -> None:
    """Nothing queued or running until 1,000 s: the next tick is the first on the 60 s grid
    after it, 1,020 s, so the action waits 20 s and the idle stretch costs no ticks."""
    result = replay(fleet, [_row("late", 1000, 10, 1)], ReplayOptions(period_s=60))
    assert result.actions[0].started_at == _at(1020)
    assert result.actions[0].waited_s == 20.0
    assert [t.time for t in result.ticks] == [_at(0), _at(1020), _at(1080)]


def test_until_stops_the_replay_and_leaves_work_where_it_is(fleet: Snapshot) -> None:
    result = replay(fleet, HEAD_BLOCKED, ReplayOptions(period_s=60, until_s=60))
    assert [a.outcome for a in result.actions] == ["running", "queued", "queued"]
    assert result.actions[1].waited_s is None


def test_the_greedy_queue_lets_small_work_pass_a_waiting_head(fleet: Snapshot) -> None:
    """In a greedy queue the head (4 GPUs) waits for room while the 2-GPU action behind it
    fits next to the running one and starts at once; a strict queue would hold it."""
    trace = [
        _row("run", 0, 100, 2, queue="greedy"),
        _row("big", 0, 10, 4, queue="greedy"),
        _row("small", 0, 10, 2, queue="greedy"),
    ]
    result = replay(fleet, trace, ReplayOptions(event_driven=True))
    starts = {a.id: a.started_at for a in result.actions}
    assert starts == {"run": _at(0), "small": _at(0), "big": _at(100)}


def test_summary_percentiles_head_blocked_time_and_failures(fleet: Snapshot) -> None:
    """Waits of started actions 0 and 110 s: p50 is 55 s by linear interpolation. The
    strict head was blocked at the tick of 60 only, which stands for 60 s."""
    summary = summarize(replay(fleet, HEAD_BLOCKED, ReplayOptions(period_s=60)))
    strict = summary["queues"]["strict"]
    assert strict["wait_s"]["p50"] == pytest.approx(55.0)
    assert strict["head_blocked_s"] == 60.0
    assert strict["failed"] == {"MAX_QUEUED_TIME_EXCEEDED": 1}
    assert summary["queues"][OVERALL]["succeeded"] == 2
    assert summary["makespan_s"] == 170.0
    assert summary["gpu_capacity"] == 4
    # Allocation weighted by time: 4 GPUs for 120 s, then 2 for 60 s, over 180 s.
    assert summary["mean_gpu_allocated"] == pytest.approx((4 * 120 + 2 * 60) / 180)
    assert "MAX_QUEUED_TIME_EXCEEDED 1" in summary_text(summary)


def test_the_same_trace_and_options_give_the_same_tables(fleet: Snapshot) -> None:
    """ "Deterministic: the same trace and options give the same tables.\""""
    chooser = random.Random(7)
    trace = [
        _row(
            f"x{i}",
            chooser.uniform(0, 600),
            chooser.uniform(10, 300),
            chooser.choice([1, 2, 4]),
            queue=chooser.choice(["strict", "greedy"]),
        )
        for i in range(40)
    ]
    for options in (ReplayOptions(period_s=30), ReplayOptions(event_driven=True)):
        first = replay_tables(replay(fleet, trace, options))
        second = replay_tables(replay(fleet, trace, options))
        assert all(first[name].equals(second[name]) for name in first)
        assert first["replay_actions"].num_rows == 40


def test_the_first_fit_baseline_places_on_the_first_node_with_room(fleet: Snapshot) -> None:
    """Issue 15: "--compare: the same trace under variants (... the first-fit baseline)". On
    two nodes of 4 GPUs a (4) and b (2) start at 0 s; at 120 s a has ended and c (2) arrives:
    first-fit puts c on the first node with room, the empty one, so d (4) arriving at 180 s
    waits for b's end at 1,000 s (freed at the 1,020 s tick); the engine puts c beside b on
    the node it fills and starts d on arrival."""
    two_nodes = FLEET | {
        "clusters": [
            {"name": "c", "node_pools": [FLEET["clusters"][0]["node_pools"][0] | {"nodes": 2}]}
        ]
    }
    trace = [_row("a", 0, 100, 4), _row("b", 0, 1000, 2)]
    trace += [_row("c", 120, 5000, 2, queue="greedy"), _row("d", 180, 100, 4, queue="greedy")]
    waits = {}
    for first_fit in (False, True):
        options = ReplayOptions(period_s=60, tick=TickOptions(first_fit=first_fit))
        result = replay(snapshot_from_dict(two_nodes), trace, options)
        waits[first_fit] = [a.waited_s for a in result.actions]
    assert waits == {False: [0.0, 0.0, 0.0, 0.0], True: [0.0, 0.0, 0.0, 840.0]}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ticks_that_keep_compiled_running_work_decide_as_fresh_ones(seed: int) -> None:
    """A simulation compiles running work once, when it starts (CompileCache); each of its
    ticks decides exactly as a tick compiling the same snapshot afresh. Untyped GPUs in a
    queue capping H100s charge the device they land on, the cache's subtle part."""
    pool = FLEET["clusters"][0]["node_pools"][0] | {"nodes": 3}  # type: ignore[index]
    capped = {"name": "greedy", "scheduling": "greedy_capacity", "max_accelerators": {"H100": 6}}
    fleet = snapshot_from_dict(
        FLEET
        | {
            "queues": [FLEET["queues"][0], capped],  # type: ignore[index]
            "clusters": [{"name": "c", "node_pools": [pool]}],
        }
    )
    chooser = random.Random(seed)
    arrivals = sorted(
        (
            _row(
                f"x{i}",
                chooser.uniform(0, 900),
                chooser.uniform(30, 400),
                chooser.choice([1, 2, 4]),
                queue=chooser.choice(["strict", "greedy"]),
            )
            for i in range(60)
        ),
        key=lambda row: row.submit_s or 0,
    )
    for index, row in enumerate(arrivals):
        if index % 3 == 0:
            arrivals[index] = row.model_copy(update={"gpu": row.gpu.split(":")[1]})  # untyped
    simulation = Simulation(fleet, TickOptions(), lambda a: (timedelta(seconds=150), "fixed"))
    started = 0
    for step in range(40):
        now = T0 + timedelta(seconds=30 * step)
        simulation.end_due(now)
        simulation.queued += [
            row.action(T0)
            for row in arrivals
            if now - timedelta(seconds=30) < _at(row.submit_s) <= now  # type: ignore[operator]
        ]
        fresh = tick(simulation.snapshot(now), TickOptions())
        kept = simulation.tick(now)
        assert kept.model_dump(exclude={"solver"}) == fresh.model_dump(exclude={"solver"})
        started += len(kept.scheduled)
    assert started > 20
