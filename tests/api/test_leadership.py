"""The leader lease in the store, on SQLite and on PostgreSQL: one holder at a time, epochs
that only grow, and every leader write fenced by its epoch in its own transaction."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from api.store.records import LeaseLost, Phase, TickViews
from api.store.sql_store import SqlStore
from models.explanation import Explanation
from models.forecast import StartForecast
from models.snapshot import Action, Cluster, Queue
from models.triggers import Trigger
from solver import tick

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
CLUSTER = Cluster.model_validate(
    {
        "name": "east",
        "node_pools": [{"name": "cpu", "node": {"cpu": "8", "memory": "8Gi"}, "nodes": 1}],
    }
)
EXPLANATION = {
    "action": "a",
    "queue": "default",
    "state": "waiting",
    "code": "blocked_behind_head",
    "message": "waits",
    "as_of": NOW,
}


def _action(action_id: str, **fields: object) -> Action:
    return Action.model_validate(
        {
            "id": action_id,
            "submitted_at": NOW,
            "containers": [{"resources": {"cpu": "1", "memory": "1Gi"}}],
        }
        | fields
    )


def test_one_holder_at_a_time_and_a_lapsed_lease_goes_to_the_next_epoch(database: str) -> None:
    """Issue 13: "Exactly one replica ticks at a time, elected through the database (an
    advisory lock or a lease row with an epoch)." """
    store = SqlStore(database)
    try:
        first = store.hold_lease("a", None, 0.3)
        assert (first.holder, first.epoch) == ("a", 1)
        assert store.hold_lease("b", None, 0.3).holder == "a"  # not yet run out
        assert store.hold_lease("a", 1, 0.3).epoch == 1  # renewed, same epoch
        time.sleep(0.4)
        taken = store.hold_lease("b", None, 5.0)
        assert (taken.holder, taken.epoch) == ("b", 2)
        # The old holder cannot renew at its old epoch: the lease is b's.
        assert store.hold_lease("a", 1, 0.3).holder == "b"
        store.release_lease("b", 2)
        assert store.hold_lease("a", 1, 0.3).epoch == 3  # released: taken at once
    finally:
        store.close()


def test_a_stale_leaders_write_back_is_refused_whole(database: str) -> None:
    """Issue 13: "The write-back of a tick is fenced: it commits only if its epoch is still
    the current one, in the same transaction, so a paused or partitioned ex-leader can never
    apply a stale plan." """
    store = SqlStore(database)
    try:
        store.put_cluster(CLUSTER)
        store.submit([_action("a"), _action("b")])
        old = store.hold_lease("old", None, 0.2).epoch
        planned = store.read_tick_input(NOW)
        plan = tick(planned.snapshot)
        time.sleep(0.3)
        new = store.hold_lease("new", None, 5.0).epoch
        assert new == old + 1
        with pytest.raises(LeaseLost) as refused:
            store.apply_tick(plan, planned.generation, epoch=old)
        assert refused.value.code.value == "FAILED_PRECONDITION"
        assert {store.get_action(a).phase for a in "ab"} == {Phase.QUEUED}
        assert store.last_tick().number == 0
        # The leader of the current epoch applies the same plan, and it is the last tick.
        applied = store.apply_tick(plan, planned.generation, epoch=new)
        assert (applied.scheduled, applied.number) == (2, 1)
        last = store.last_tick()
        # Only where other replicas read it is the result kept (a SQLite file has one server).
        assert (last.number, last.epoch, last.result) == (1, new, plan if store.shared else None)
        assert store.last_tick(after=1).result is None  # nothing newer to parse
    finally:
        store.close()


def test_deadline_expiry_and_trigger_firing_are_fenced_too(database: str) -> None:
    """Issue 13 (brief): the trigger firing and deadline expiry writes "also must happen
    once": only the leader at the current epoch makes them."""
    store = SqlStore(database)
    try:
        store.put_cluster(CLUSTER)
        store.create_queue(Queue(name="batch"))
        store.submit([_action("d", deadline="1s")])
        stale = store.hold_lease("old", None, 0.1).epoch
        planned = store.read_tick_input(NOW)
        store.apply_tick(tick(planned.snapshot), planned.generation, epoch=stale)
        trigger = Trigger.model_validate(
            {
                "name": "t",
                "schedule": {"every": "2s"},
                "queue": "batch",
                "actions": [{"containers": [{"resources": {"cpu": "1", "memory": "1Gi"}}]}],
            }
        )
        store.create_trigger(trigger, NOW)
        time.sleep(0.2)
        current = store.hold_lease("new", None, 5.0).epoch
        later = NOW + timedelta(seconds=3)
        with pytest.raises(LeaseLost):
            store.expire_deadlines(later, epoch=stale)
        with pytest.raises(LeaseLost):
            store.fire_triggers(later, timedelta(seconds=10), epoch=stale)
        with pytest.raises(LeaseLost):
            store.stop_idle_environments(later, epoch=stale)
        assert store.get_action("d").phase is Phase.SCHEDULED
        assert store.get_trigger("t").history == []
        assert store.expire_deadlines(later, epoch=current) == ["d"]
        assert len(store.fire_triggers(later, timedelta(seconds=10), epoch=current)) == 1
    finally:
        store.close()


def test_what_a_tick_shows_is_kept_with_it_for_the_followers(database: str) -> None:
    """Issue 13: "Watchers on any replica see every tick (...; no replica-local state is
    authoritative)": a tick's head explanations and deadline failures are stored with its
    write-back, its forecasts once made, where other replicas read the database."""
    store = SqlStore(database)
    try:
        store.put_cluster(CLUSTER)
        store.submit([_action("a"), _action("b")])
        epoch = store.hold_lease("leader", None, 5.0).epoch
        planned = store.read_tick_input(NOW)
        explanation = Explanation.model_validate(EXPLANATION)
        views = TickViews({"default": explanation}, {"default": ["gone"]})
        number = store.apply_tick(
            tick(planned.snapshot), planned.generation, epoch=epoch, views=views
        ).number
        assert store.tick_forecasts(number) is None  # not made yet
        forecasts = {"b": StartForecast(action="b", estimated_start=NOW, assumption="x")}
        store.record_forecasts(number, forecasts)
        store.record_forecasts(number - 1, {})  # an older tick's come too late: dropped
        last = store.last_tick()
        if store.shared:
            assert last.views == views
            assert store.tick_forecasts(number) == forecasts
        else:  # one server, which keeps them in memory
            assert last.views == TickViews()
            assert store.tick_forecasts(number) is None
        assert store.last_tick(after=number).views == TickViews()  # nothing newer to parse
    finally:
        store.close()
