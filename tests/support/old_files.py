"""SQLite files as older Sluice versions left them, made from a current one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

# What each schema version added besides: triggers, and keys of `meta`.
_ADDED_TRIGGERS = {8: ("actions_stamp_insert", "actions_stamp_update")}
_ADDED_META = {8: ("action_changes", "store_id")}
# What each schema version added: tables, then (table, column) pairs, then indexes.
_ADDED: dict[int, tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    8: ((), (("actions", "changed"),), ("actions_changed",)),
    7: (
        (),
        (
            ("last_tick", "head_explanations"),
            ("last_tick", "deadline_exceeded"),
            ("last_tick", "forecasts"),
        ),
        (),
    ),
    6: (("retired_totals",), (), ("jobs_live_phases",)),
    5: (("leader_lease", "last_tick"), (), ()),
    4: (("tasks", "run_queues"), (("actions", "queue_source"),), ()),
    3: (
        ("triggers", "trigger_firings"),
        (("actions", "deadline_at"), ("environments", "idle_timeout_s")),
        ("actions_deadline",),
    ),
    2: (("scheduling_policies", "service_environments", "job_queues", "jobs"), (), ()),
}


def downgrade(path: Path, version: int) -> None:
    """Strip the file at `path` (closed) down to what schema `version` had."""
    with sqlite3.connect(path) as conn:
        for newer in sorted(_ADDED, reverse=True):
            if newer <= version:
                break
            tables, columns, indexes = _ADDED[newer]
            for trigger in _ADDED_TRIGGERS.get(newer, ()):
                conn.execute(f"DROP TRIGGER {trigger}")
            for key in _ADDED_META.get(newer, ()):
                conn.execute("DELETE FROM meta WHERE key = ?", (key,))
            for index in indexes:
                conn.execute(f"DROP INDEX {index}")
            for table, column in columns:
                conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
            for table in tables:
                conn.execute(f"DROP TABLE {table}")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(version),))
