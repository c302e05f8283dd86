"""A stored row the engine cannot represent, or that no longer validates, fails one action.

Issue 11: "Defence in depth: a tick never fails because of one action, queue or pool. If
something still cannot be compiled, that action fails `INFEASIBLE` [...] and the rest of the
line is scheduled. A test plants such a row directly in the store and shows the next tick
schedules everything else." Before the change, the first row stopped every tick with an
OverflowError, the second with a ValidationError reading the snapshot.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from api.metrics import tick_metric_families
from api.store.sql_store import SqlStore
from api.tick_work import HeadExplaining, solver_tick
from api.ticker import TickLoop
from models.snapshot import Action, Cluster
from solver import TickOptions

SUBMITTED = datetime.now(UTC) - timedelta(minutes=5)
CLUSTER = Cluster.model_validate(
    {
        "name": "east",
        "node_pools": [{"name": "cpu", "node": {"cpu": "8", "memory": "32Gi"}, "nodes": 2}],
    }
)


def _action(action_id: str) -> Action:
    return Action(
        id=action_id,
        submitted_at=SUBMITTED,
        containers=[{"resources": {"cpu": "1", "memory": "1Gi"}}],
    )


def _plant(db: Path, action_id: str, memory: object) -> None:
    """A queued row written with plain sqlite3, as an old version or a hand edit would."""
    body = _action(action_id).model_dump(mode="json", exclude={"state", "placement"})
    body["containers"][0]["resources"]["memory"] = memory
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO actions (id, queue, phase, body, submitted_at)"
            " VALUES (?, 'default', 'queued', ?, ?)",
            (action_id, json.dumps(body), SUBMITTED.isoformat()),
        )
    conn.close()


def test_a_planted_row_fails_alone_and_the_next_tick_schedules_everything_else(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sluice.db"
    store = SqlStore(db)
    store.put_cluster(CLUSTER)
    store.submit([_action("before")])
    store.close()  # stopped: nothing holds the file while the rows are planted
    _plant(db, "huge", 2**80)  # valid to the models, beyond the engine's int64
    _plant(db, "garbled", "a lot")  # no longer validates at all
    store = SqlStore(db)
    try:
        store.submit([_action("after")])
        heads = HeadExplaining(TickOptions(time_limit_s=5.0), budget_s=1.0)
        ticker = TickLoop(store, solver_tick(5.0), period_s=3600.0, heads=heads)
        result = asyncio.run(ticker.run_once())
        assert result is not None and ticker.stats.failures == 0
        phases = {a: store.get_action(a).phase.value for a in ("before", "after")}
        assert phases == {"before": "scheduled", "after": "scheduled"}
        # Read with sqlite3: the garbled body is no Action for the store's own readers either.
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT id, phase, code, message FROM actions WHERE id IN ('huge', 'garbled')"
            ).fetchall()
        conn.close()
        for planted, phase, code, message in rows:
            assert (phase, code) == ("failed", "INFEASIBLE"), planted
            assert "containers.0.resources" in message and "memory" in message, message
        assert len(rows) == 2
        assert ticker.stats.rejected_actions == 2
        samples = {s.name: s.value for f in tick_metric_families(ticker.stats) for s in f.samples}
        assert samples["sluice_tick_rejected_actions_total"] == 2
        # The API's own snapshot reads on: the failed rows are no longer live.
        assert {a.id for a in store.read_snapshot(datetime.now(UTC)).actions} == {
            "before",
            "after",
        }
    finally:
        store.close()
