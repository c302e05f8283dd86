"""Snapshot version 3: the actions' columns forecasts read (task, expected_duration, a
running action's started_at), and older snapshots without them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.arrow.decode import snapshot_from_tables
from models.arrow.tables import snapshot_tables
from models.errors import InvalidInput
from models.scenario import snapshot_from_dict
from models.snapshot import Snapshot

NOW = datetime(2026, 12, 1, tzinfo=UTC)
NODE = {"cpu": "8", "memory": "64Gi"}
PLACED = {"cluster": "c", "containers": [{"name": "main", "node_pool": "p", "node": 0}]}


def _snapshot(**running: object) -> Snapshot:
    container = [{"name": "main", "resources": {"cpu": "1"}}]
    return snapshot_from_dict(
        {
            "now": NOW.isoformat(),
            "clusters": [{"name": "c", "node_pools": [{"name": "p", "node": NODE, "nodes": 1}]}],
            "actions": [
                {
                    "id": "r",
                    "submitted_at": NOW.isoformat(),
                    "state": "running",
                    "placement": PLACED,
                    "containers": container,
                    "started_at": NOW.isoformat(),
                    **running,
                },
                {
                    "id": "q",
                    "submitted_at": NOW.isoformat(),
                    "containers": container,
                    "task": "train",
                    "expected_duration": "2h",
                },
            ],
        }
    )


def test_the_forecast_columns_round_trip() -> None:
    snapshot = _snapshot(expected_duration="30m")
    back = snapshot_from_tables(snapshot_tables(snapshot))
    assert back == snapshot
    assert [(a.task, a.expected_duration, a.started_at) for a in back.actions] == [
        (None, timedelta(minutes=30), NOW),
        ("train", timedelta(hours=2), None),
    ]


def test_a_version_2_snapshot_reads_the_new_columns_as_null() -> None:
    """ "an older snapshot reads them as null" (models.arrow.schema)."""
    tables = snapshot_tables(_snapshot())
    old = {}
    for name, table in tables.items():
        if name == "actions":
            table = table.drop_columns(["task", "expected_duration", "started_at"])
        metadata = dict(table.schema.metadata) | {b"sluice.snapshot.version": b"2"}
        old[name] = table.replace_schema_metadata(metadata)
    back = snapshot_from_tables(old)
    assert [(a.task, a.expected_duration, a.started_at) for a in back.actions] == [
        (None, None, None),
        (None, None, None),
    ]


@pytest.mark.parametrize("bad", ["0s", "367d"])
def test_an_expected_duration_is_above_zero_and_at_most_a_year(bad: str) -> None:
    with pytest.raises(InvalidInput, match="expected_duration"):
        _snapshot(expected_duration=bad)


def test_a_queued_action_has_no_start_time() -> None:
    tables = snapshot_tables(_snapshot())
    actions = tables["actions"]
    column = actions.schema.get_field_index("started_at")
    started = actions.column("started_at").to_pylist()
    changed = actions.set_column(column, actions.schema.field(column), [[started[0], started[0]]])
    with pytest.raises(InvalidInput, match="started_at: is set for a queued action"):
        snapshot_from_tables({**tables, "actions": changed})
