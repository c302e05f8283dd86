"""Snapshots and tick results as Arrow tables, on disk and on the wire.

On disk a snapshot (or a result) is a directory holding one file per table,
`<table>.arrow` (the Arrow IPC file format, readable by pyarrow, polars, duckdb
and pandas.read_feather) or `<table>.parquet`. On the wire (`GET /snapshot`)
it is one Arrow IPC stream per table, back to back, in the order of
models.arrow.schema.SNAPSHOT_TABLES; each stream's schema names its table. A
file holding such a stream is read like a directory.

    tables = snapshot_tables(snapshot)            # Python objects -> Arrow
    write_snapshot(snapshot, "snap/")             # one .arrow file per table
    snapshot = read_snapshot("snap/")             # column-wise, see models.arrow.decode
    write_snapshot_stream(snapshot, response)     # the service's GET /snapshot body
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, BinaryIO, Literal

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from models.arrow.decode import snapshot_from_tables
from models.arrow.schema import (
    ACTIONS,
    CLUSTERS,
    CONTAINERS,
    ENVIRONMENTS,
    ENVIRONMENTS_STARTED,
    FAILED,
    JOB_QUEUES,
    JOBS,
    PLACEMENTS,
    QUEUE_HEADS,
    QUEUES,
    QUOTA_FAILED,
    QUOTA_JOB_QUEUES,
    QUOTA_PREEMPTED,
    QUOTA_SCHEDULED,
    QUOTA_SHARES,
    QUOTA_USAGE,
    QUOTA_WAITING,
    SCHEDULED,
    SCHEDULING_POLICIES,
    SERVICE_ENVIRONMENTS,
    SETTINGS,
    SNAPSHOT_TABLES,
    SNAPSHOT_VERSION,
    SOLVER,
    TABLE_KEY,
    USAGE,
    WAITING,
)
from models.errors import InvalidInput
from models.quota_result import QuotaTickResult
from models.resources import ResourceKind, kind_of
from models.result import PlacedContainer, QueueMetrics, ScheduledAction, TickResult
from models.snapshot import Container, ContainerPlacement, Environment, Placement, Snapshot

Format = Literal["arrow", "parquet"]
STREAM_MEDIA_TYPE = "application/vnd.apache.arrow.stream"

__all__ = [
    "CARRIED",
    "STREAM_MEDIA_TYPE",
    "quota_result_tables",
    "read_snapshot",
    "read_snapshot_stream",
    "read_tables",
    "result_tables",
    "snapshot_from_tables",
    "snapshot_tables",
    "write_snapshot",
    "write_snapshot_stream",
    "write_tables",
]


def _table(schema: pa.Schema, columns: Mapping[str, list[Any]]) -> pa.Table:
    """A table built against its schema (never inferred); columns must match it exactly."""
    return pa.Table.from_arrays(
        [pa.array(columns[field.name], field.type) for field in schema], schema=schema
    )


def _objects_table(schema: pa.Schema, items: Sequence[Any], **columns: list[Any]) -> pa.Table:
    """One row per item. A column not given in `columns` holds the item's attribute of the
    column's name: an enum as its value, a map as its (key, value) pairs."""
    return _table(
        schema,
        {
            field.name: columns[field.name]
            if field.name in columns
            else [_cell(getattr(item, field.name)) for item in items]
            for field in schema
        },
    )


def _cell(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return list(value.items())
    return value


# --- snapshot -> tables ---------------------------------------------------------------------------


CARRIED = (
    "now",
    "settings",
    "queues",
    "clusters",
    "actions",
    "environments",
    "scheduling_policies",
    "service_environments",
    "job_queues",
    "jobs",
)
"""The Snapshot fields the snapshot tables hold."""


def snapshot_tables(snapshot: Snapshot) -> dict[str, pa.Table]:
    """The twelve snapshot tables of `snapshot` (see models.arrow.schema)."""
    _check_carried(snapshot)
    return {
        "settings": _table(
            SETTINGS,
            {"now": [snapshot.now], "default_gpu_type": [snapshot.settings.default_gpu_type]},
        ),
        "queues": _objects_table(QUEUES, snapshot.queues),
        "clusters": _clusters_table(snapshot),
        "environments": _objects_table(
            ENVIRONMENTS,
            snapshot.environments,
            placement_cluster=[_cluster_of(e.placement) for e in snapshot.environments],
        ),
        "actions": _actions_table(snapshot),
        "containers": _containers_table(snapshot),
        "placements": _placements_table(snapshot),
        **_quota_tables(snapshot),
    }


def _check_carried(snapshot: Snapshot) -> None:
    """Refuse, rather than drop, what a snapshot holds beyond the tables of this version."""
    extra = [
        name
        for name, field in Snapshot.model_fields.items()
        if name not in CARRIED
        and getattr(snapshot, name) != field.get_default(call_default_factory=True)
    ]
    if extra:
        raise InvalidInput(
            f"the snapshot has {', '.join(extra)}, which Arrow snapshots (version"
            f" {SNAPSHOT_VERSION}) do not carry yet"
        )


def _cluster_of(placement: Placement | None) -> str | None:
    return placement.cluster if placement else None


def _clusters_table(snapshot: Snapshot) -> pa.Table:
    rows: list[dict[str, Any]] = []
    for cluster in snapshot.clusters:
        if not cluster.node_pools:
            rows.append({"cluster": cluster.name})
        for pool in cluster.node_pools:
            rows.append(
                {
                    "cluster": cluster.name,
                    "node_pool": pool.name,
                    "node_cpu": pool.node.cpu,
                    "node_memory": pool.node.memory,
                    "node_accelerator": pool.node.accelerator,
                    "node_accelerators": pool.node.accelerators,
                    "node_resources": list(pool.node.resources.items()),
                    "labels": list(pool.labels.items()),
                    "nodes": pool.nodes,
                    "max_nodes": pool.max_nodes,
                }
            )
    return _table(CLUSTERS, {f.name: [row.get(f.name) for row in rows] for f in CLUSTERS})


def _actions_table(snapshot: Snapshot) -> pa.Table:
    actions = snapshot.actions
    deadlines = [a.deadline for a in actions]
    return _objects_table(
        ACTIONS,
        actions,
        deadline=[d if isinstance(d, datetime) else None for d in deadlines],
        deadline_after=[None if isinstance(d, datetime) else d for d in deadlines],
        placement_cluster=[_cluster_of(a.placement) for a in actions],
    )


def _containers_table(snapshot: Snapshot) -> pa.Table:
    # (action, environment, name, the container or replica shape)
    owned: list[tuple[str | None, str | None, str | None, Container | Environment]] = [
        (action.id, None, container.name, container)
        for action in snapshot.actions
        for container in action.containers
    ]
    owned += [(None, env.name, None, env) for env in snapshot.environments]
    requests = [shape.gpu for *_, shape in owned]
    return _table(
        CONTAINERS,
        {
            "action": [action for action, *_ in owned],
            "environment": [env for _, env, *_ in owned],
            "name": [name for _, _, name, _ in owned],
            "resources": [list(shape.resources.items()) for *_, shape in owned],
            "gpu_count": [r.count if r else None for r in requests],
            "gpu_device": [r.device.canonical if r and r.device else None for r in requests],
            "node_selector": [list(shape.node_selector.items()) for *_, shape in owned],
        },
    )


def _placements_table(snapshot: Snapshot) -> pa.Table:
    # (action, environment, container): each row belongs to one or the other
    rows: list[tuple[str | None, str | None, ContainerPlacement]] = [
        (action.id, None, spot)
        for action in snapshot.actions
        if action.placement
        for spot in action.placement.containers
    ]
    rows += [
        (None, env.name, spot)
        for env in snapshot.environments
        if env.placement
        for spot in env.placement.containers
    ]
    return _table(
        PLACEMENTS,
        {
            "action": [action for action, _, _ in rows],
            "environment": [env for _, env, _ in rows],
            "container": [spot.name for *_, spot in rows],
            "node_pool": [spot.node_pool for *_, spot in rows],
            "node": [spot.node for *_, spot in rows],
        },
    )


def _quota_tables(snapshot: Snapshot) -> dict[str, pa.Table]:
    """The quota-managed job queues' five tables (schema version 2)."""
    policies, environments = snapshot.scheduling_policies, snapshot.service_environments
    queues, jobs = snapshot.job_queues, snapshot.jobs
    shares = [(queue.name, share) for queue in queues for share in queue.quota_shares]
    return {
        "scheduling_policies": _objects_table(
            SCHEDULING_POLICIES,
            policies,
            quota_share_policy=[
                p.quota_share_policy.idle_resource_assignment_strategy.value
                if p.quota_share_policy
                else None
                for p in policies
            ],
        ),
        "service_environments": _objects_table(SERVICE_ENVIRONMENTS, environments),
        "job_queues": _objects_table(JOB_QUEUES, queues),
        "quota_shares": _objects_table(
            QUOTA_SHARES, [s for _, s in shares], job_queue=[queue for queue, _ in shares]
        ),
        "jobs": _objects_table(JOBS, jobs),
    }


# --- tick result -> tables ------------------------------------------------------------------------


def result_tables(result: TickResult) -> dict[str, pa.Table]:
    """The tick result as plain tables (see models.arrow.schema.RESULT_TABLES)."""
    # an action joining a running pool has no containers of its own: one row with nulls
    scheduled: list[tuple[ScheduledAction, PlacedContainer | None]] = [
        (s, c) for s in result.scheduled for c in (s.containers or (None,))
    ]
    started = [(e, c) for e in result.environments_started for c in e.containers]
    queues = list(result.queues.values())
    usage = [row for metrics in queues for row in _usage_rows(metrics)]
    return {
        "scheduled": _objects_table(
            SCHEDULED, [s for s, _ in scheduled], **_placed([c for _, c in scheduled])
        ),
        "environments_started": _objects_table(
            ENVIRONMENTS_STARTED, [e for e, _ in started], **_placed([c for _, c in started])
        ),
        "failed": _objects_table(FAILED, result.failed),
        "waiting": _objects_table(WAITING, result.waiting),
        "usage": _table(USAGE, {f.name: [row[i] for row in usage] for i, f in enumerate(USAGE)}),
        "queue_heads": _objects_table(QUEUE_HEADS, queues, queue=[m.name for m in queues]),
        "solver": _table(
            SOLVER,
            {
                "now": [result.now],
                "status": [result.solver.status.value],
                "wall_time_s": [result.solver.wall_time_s],
                "limit_hit": [result.solver.limit_hit],
            },
        ),
        **quota_result_tables(result.quota),
    }


def _placed(containers: Sequence[PlacedContainer | None]) -> dict[str, list[Any]]:
    """Where each container went; all null for an action that joins a running pool."""
    return {
        "container": [c.name if c else None for c in containers],
        "node_pool": [c.node_pool if c else None for c in containers],
        "node": [c.node if c else None for c in containers],
        "new_node": [c.new_node if c else None for c in containers],
    }


def quota_result_tables(result: QuotaTickResult | None) -> dict[str, pa.Table]:
    """The quota part of a tick as six tables (empty when the snapshot has no job queues)."""
    scheduled = result.scheduled if result else []
    preempted = result.preempted if result else []
    waiting = result.waiting if result else []
    failed = result.failed if result else []
    queues = list(result.job_queues.values()) if result else []
    shares = [(q.name, s) for q in queues for s in q.shares.values()]
    usage = [
        (queue, share, instance_type)
        for queue, share in shares
        for instance_type in sorted(share.capacity_limits.keys() | share.usage.keys())
    ]
    pools = [(q, t) for q in queues for t in sorted(q.max_capacity.keys() | q.usage.keys())]
    return {
        "quota_scheduled": _objects_table(QUOTA_SCHEDULED, scheduled),
        "quota_preempted": _objects_table(QUOTA_PREEMPTED, preempted),
        "quota_waiting": _objects_table(QUOTA_WAITING, waiting),
        "quota_failed": _objects_table(QUOTA_FAILED, failed),
        "quota_usage": _table(
            QUOTA_USAGE,
            {
                "job_queue": [queue for queue, _, _ in usage],
                "share": [share.name for _, share, _ in usage],
                "strategy": [share.strategy.value for _, share, _ in usage],
                "instance_type": [t for _, _, t in usage],
                "capacity_limit": [share.capacity_limits.get(t, 0) for _, share, t in usage],
                "borrow_limit": [share.borrow_limit for _, share, _ in usage],
                "used": [share.usage.get(t, 0) for _, share, t in usage],
                "borrowed": [share.borrowed.get(t, 0) for _, share, t in usage],
                "lent": [share.lent.get(t, 0) for _, share, t in usage],
                "queued": [len(share.line) for _, share, _ in usage],
            },
        ),
        "quota_job_queues": _table(
            QUOTA_JOB_QUEUES,
            {
                "job_queue": [q.name for q, _ in pools],
                "state": [q.status.state.value for q, _ in pools],
                "status": [q.status.status.value for q, _ in pools],
                "reason": [q.status.reason for q, _ in pools],
                "service_environment": [q.service_environment for q, _ in pools],
                "instance_type": [t for _, t in pools],
                "max_capacity": [q.max_capacity.get(t, 0) for q, t in pools],
                "used": [q.usage.get(t, 0) for q, t in pools],
                "unassigned_used": [q.unassigned_used.get(t, 0) for q, t in pools],
            },
        ),
    }


def _usage_rows(m: QueueMetrics) -> Iterable[tuple[str, str, str, int, int | None]]:
    """(queue, kind, resource, used, cap) for every used or capped resource, device and limit."""
    held, caps = m.held(), m.caps()
    # Named resources first, then accelerators (untyped `gpu` among the devices), by name.
    for resource in sorted(held.keys() | caps.keys(), key=lambda r: (_is_accelerator(r), r)):
        kind = "accelerator" if _is_accelerator(resource) else "resource"
        yield m.name, kind, resource, held.amount(resource), caps.get(resource)
    yield m.name, "concurrency", "actions", m.running_actions, m.action_concurrency
    yield m.name, "concurrency", "runs", m.active_runs, m.run_concurrency
    yield m.name, "concurrency", "depth", m.depth_used, m.depth


def _is_accelerator(resource: str) -> bool:
    return kind_of(resource) is not ResourceKind.NAMED


# --- files and streams ----------------------------------------------------------------------------


def write_tables(
    tables: Mapping[str, pa.Table], directory: str | Path, fmt: Format = "arrow"
) -> None:
    """One `<name>.arrow` (IPC file) or `<name>.parquet` per table in `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        path = directory / f"{name}.{fmt}"
        if fmt == "parquet":
            pq.write_table(table, path)
        else:
            with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)


def read_tables(path: str | Path) -> dict[str, pa.Table]:
    """Every table of a directory (`*.arrow`, `*.parquet`) or of a file of IPC streams."""
    path = Path(path)
    if path.is_dir():
        tables: dict[str, pa.Table] = {}
        for file in sorted([*path.glob("*.arrow"), *path.glob("*.parquet")]):
            if file.stem in tables:
                raise InvalidInput(f"{path}: table {file.stem} is there as .arrow and .parquet")
            tables[file.stem] = _read_file(file)
        return tables
    try:
        with pa.memory_map(str(path)) as source:
            return _read_streams(source, str(path))
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no such snapshot file or directory") from None


_KIND = {".arrow": "Arrow IPC", ".parquet": "Parquet"}


def _read_file(file: Path) -> pa.Table:
    try:
        if file.suffix == ".parquet":
            table = pq.read_table(file)
        else:
            with pa.memory_map(str(file)) as source:
                table = ipc.open_file(source).read_all()
        # A file whose header and footer are intact can still hold offsets or lengths that
        # point outside its buffers; reading such a column crashes the process, so every
        # buffer is checked before a column is read.
        table.validate(full=True)
    except (pa.ArrowException, OSError) as error:
        raise InvalidInput(
            f"{file}: not a readable {_KIND[file.suffix]} file: {error} (table {file.stem})",
            field=file.stem,
        ) from None
    return table


def _read_streams(source: pa.NativeFile, where: str) -> dict[str, pa.Table]:
    """Back-to-back IPC streams, each naming its table in the schema metadata."""
    tables: dict[str, pa.Table] = {}
    while source.tell() < source.size():
        try:
            table = ipc.open_stream(source).read_all()
        except (pa.ArrowException, OSError) as error:
            raise InvalidInput(
                f"{where}: not an Arrow IPC stream: {error} (stream {len(tables)})"
            ) from None
        name = (table.schema.metadata or {}).get(TABLE_KEY, b"").decode(errors="replace")
        if not name:
            raise InvalidInput(f"{where}: stream {len(tables)} does not name its table")
        try:
            table.validate(full=True)  # as in _read_file: a bad offset would crash the reader
        except pa.ArrowException as error:
            raise InvalidInput(
                f"{where}: table {name}: not a valid Arrow IPC stream: {error}", field=name
            ) from None
        tables[name] = table
    return tables


def write_snapshot(snapshot: Snapshot, directory: str | Path, fmt: Format = "arrow") -> None:
    write_tables(snapshot_tables(snapshot), directory, fmt)


def read_snapshot(path: str | Path) -> Snapshot:
    """A snapshot directory (Arrow or Parquet files) or stream file, validated column-wise."""
    return snapshot_from_tables(read_tables(path), str(path))


def write_snapshot_stream(snapshot: Snapshot, sink: BinaryIO | pa.NativeFile) -> None:
    """The snapshot as back-to-back IPC streams, one per table (the `GET /snapshot` body)."""
    tables = snapshot_tables(snapshot)
    for name in SNAPSHOT_TABLES:
        with ipc.new_stream(sink, tables[name].schema) as writer:
            writer.write_table(tables[name])


def read_snapshot_stream(data: bytes, where: str = "stream") -> Snapshot:
    """A snapshot from the bytes of back-to-back IPC streams (a `GET /snapshot` body)."""
    return snapshot_from_tables(_read_streams(pa.BufferReader(data), where), where)
