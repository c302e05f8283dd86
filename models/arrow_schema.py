"""Every Arrow table Sluice writes or reads, as one explicit schema each.

A snapshot is the whole input of one tick as seven tables; a tick result is
seven more; a what-if comparison adds three and a sweep two. Tables are always
built against these constants, never by type inference, and every schema
carries its version and table name in the metadata so a reader can refuse a
file it does not understand (see docs/README-whatif.md for each column).

Choices where the issue left room:
- Quantities are int64 in solver units (cpu in millicores, memory and every
  other named resource in base units, bytes for memory). A reader also accepts
  Kubernetes spellings (`"64Gi"`) in a string column, so a hand-made Parquet
  file works; the writer always writes integers.
- Caps and requests are `map<string, int64>` columns (resource or canonical
  device to amount) rather than long tables: a queue or a container stays one
  row, only the named resources are present (an absent key means uncapped or
  not requested), and a map column decodes column-wise through its flat
  keys/values arrays. Results, which people query, use a long usage table.
- Devices are canonical strings (`nvidia_gpu/nvidia-h100`, with a partition
  `nvidia_gpu/nvidia-a100/1g.5gb`); a reader also accepts any alias.
- Arrival order is row order of `actions`; container order is row order
  within an action.
"""

from __future__ import annotations

import pyarrow as pa

SNAPSHOT_VERSION = "1"
RESULT_VERSION = "1"
SNAPSHOT_VERSION_KEY = b"sluice.snapshot.version"
RESULT_VERSION_KEY = b"sluice.result.version"
TABLE_KEY = b"sluice.table"

TIMESTAMP = pa.timestamp("us", tz="UTC")
DURATION = pa.duration("us")
AMOUNTS = pa.map_(pa.string(), pa.int64())
"""Resource (or canonical device) to an amount in solver units."""
LABELS = pa.map_(pa.string(), pa.string())


def _required(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=False)


def _optional(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=True)


def _schema(table: str, version_key: bytes, version: str, *fields: pa.Field) -> pa.Schema:
    return pa.schema(
        list(fields), metadata={version_key: version.encode(), TABLE_KEY: table.encode()}
    )


def _snapshot_table(table: str, *fields: pa.Field) -> pa.Schema:
    return _schema(table, SNAPSHOT_VERSION_KEY, SNAPSHOT_VERSION, *fields)


def _result_table(table: str, *fields: pa.Field) -> pa.Schema:
    return _schema(table, RESULT_VERSION_KEY, RESULT_VERSION, *fields)


# --- snapshot -----------------------------------------------------------------------------------

SETTINGS = _snapshot_table(
    "settings",  # exactly one row
    _required("now", TIMESTAMP),
    _optional("default_gpu_type", pa.string()),  # canonical device; null: no default
)

QUEUES = _snapshot_table(
    "queues",
    _required("name", pa.string()),
    _required("pool", pa.string()),
    _optional("run_concurrency", pa.int64()),  # null: unlimited (likewise below)
    _optional("action_concurrency", pa.int64()),
    _optional("depth", pa.int64()),
    _required("priority", pa.int64()),
    _required("max_resources", AMOUNTS),  # cpu millicores, memory bytes, any named resource
    _optional("max_gpus", pa.int64()),  # untyped NVIDIA GPU requests
    _required("max_accelerators", AMOUNTS),  # canonical device (with partition) -> count
    _required("scheduling", pa.string()),  # strict_fifo | greedy_capacity
    _optional("clusters", pa.list_(pa.string())),  # null: every cluster
    _optional("head_blocked_since", TIMESTAMP),  # carried from the previous tick
)

CLUSTERS = _snapshot_table(
    "clusters",  # one row per node pool; a cluster without pools is one row with node_pool null
    _required("cluster", pa.string()),
    _optional("node_pool", pa.string()),
    _optional("node_cpu", pa.int64()),  # allocatable room of one node; required with node_pool
    _optional("node_memory", pa.int64()),
    _optional("node_accelerator", pa.string()),  # canonical device, null: none
    _optional("node_accelerators", pa.int64()),  # devices per node; required with node_pool
    _optional("node_resources", AMOUNTS),  # other named resources of one node
    _optional("labels", LABELS),
    _optional("nodes", pa.int64()),  # nodes up now; required with node_pool
    _optional("max_nodes", pa.int64()),  # full scale; null: `nodes`
)

ACTIONS = _snapshot_table(
    "actions",  # row order is arrival order
    _required("id", pa.string()),
    _optional("run", pa.string()),  # null: a run of its own
    _required("queue", pa.string()),
    _required("submitted_at", TIMESTAMP),
    _required("state", pa.string()),  # queued | running
    _optional("environment", pa.string()),  # runs in this reusable pool (and has no containers)
    _optional("max_queued_time", DURATION),
    _optional("deadline", TIMESTAMP),  # an absolute deadline ...
    _optional("deadline_after", DURATION),  # ... or one relative to submitted_at (not both)
    _optional("placement_cluster", pa.string()),  # where a running action runs
)

CONTAINERS = _snapshot_table(
    "containers",  # an action's containers, or an environment's replica shape (one row)
    _optional("action", pa.string()),  # exactly one of action / environment
    _optional("environment", pa.string()),
    _optional("name", pa.string()),  # required for an action's container, null for a replica
    _required("resources", AMOUNTS),
    _optional("gpu_count", pa.int64()),  # null: no accelerator request
    _optional("gpu_device", pa.string()),  # canonical device; null with a count: untyped gpu
    _required("node_selector", LABELS),
)

ENVIRONMENTS = _snapshot_table(
    "environments",
    _required("name", pa.string()),
    _required("queue", pa.string()),
    _required("replicas", pa.int64()),
    _required("running", pa.bool_()),
    _optional("placement_cluster", pa.string()),  # where a running pool runs
)

PLACEMENTS = _snapshot_table(
    "placements",  # one row per placed container of a running action or environment
    _optional("action", pa.string()),  # exactly one of action / environment
    _optional("environment", pa.string()),
    _required("container", pa.string()),  # an environment's replicas are replica-0, replica-1, ...
    _required("node_pool", pa.string()),  # in the owner's placement_cluster
    _required("node", pa.int64()),
)

SNAPSHOT_TABLES: dict[str, pa.Schema] = {
    "settings": SETTINGS,
    "queues": QUEUES,
    "clusters": CLUSTERS,
    "environments": ENVIRONMENTS,
    "actions": ACTIONS,
    "containers": CONTAINERS,
    "placements": PLACEMENTS,
}
"""Every snapshot table, in the order a stream carries them."""

# Columns holding quantities: `resource` names the unit for a scalar column; None is a map
# column whose keys name the resource.
QUANTITY_COLUMNS: dict[tuple[str, str], str | None] = {
    ("queues", "max_resources"): None,
    ("clusters", "node_cpu"): "cpu",
    ("clusters", "node_memory"): "memory",
    ("clusters", "node_resources"): None,
    ("containers", "resources"): None,
}

# Columns (or map columns' keys) holding device names.
DEVICE_COLUMNS: frozenset[tuple[str, str]] = frozenset(
    {
        ("settings", "default_gpu_type"),
        ("queues", "max_accelerators"),
        ("clusters", "node_accelerator"),
        ("containers", "gpu_device"),
    }
)

# --- tick result ----------------------------------------------------------------------------------

SCHEDULED = _result_table(
    "scheduled",  # one row per placed container; one row with nulls for an action joining a pool
    _required("action", pa.string()),
    _required("queue", pa.string()),
    _required("run", pa.string()),
    _optional("cluster", pa.string()),  # null: joins an environment's running pool
    _optional("environment", pa.string()),
    _optional("container", pa.string()),
    _optional("node_pool", pa.string()),
    _optional("node", pa.int64()),
    _optional("new_node", pa.bool_()),  # the node is started by this placement
)

ENVIRONMENTS_STARTED = _result_table(
    "environments_started",  # one row per replica of a pool started this tick
    _required("environment", pa.string()),
    _required("queue", pa.string()),
    _required("cluster", pa.string()),
    _required("container", pa.string()),
    _required("node_pool", pa.string()),
    _required("node", pa.int64()),
    _required("new_node", pa.bool_()),
)

FAILED = _result_table(
    "failed",
    _required("action", pa.string()),
    _required("queue", pa.string()),
    _required("code", pa.string()),  # models.errors.ErrorCode
    _required("message", pa.string()),
)

WAITING = _result_table(
    "waiting",
    _required("action", pa.string()),
    _required("queue", pa.string()),
    _required("reason", pa.string()),  # models.result.WaitReason
    _optional("resource", pa.string()),  # the capped resource, for queue_cap
    _required("message", pa.string()),
)

USAGE = _result_table(
    "usage",  # per queue, one row per capped or used resource, device and concurrency limit
    _required("queue", pa.string()),
    _required("kind", pa.string()),  # resource | accelerator | concurrency
    _required("resource", pa.string()),  # cpu, memory, ...; gpu or a canonical device; actions...
    _required("used", pa.int64()),  # solver units
    _optional("cap", pa.int64()),  # null: uncapped
)

QUEUE_HEADS = _result_table(
    "queue_heads",  # one row per queue
    _required("queue", pa.string()),
    _required("scheduling", pa.string()),
    _required("head_blocked", pa.bool_()),
    _optional("head_blocked_since", TIMESTAMP),
    _optional("head_action", pa.string()),
    _required("blocked_behind_head", pa.int64()),
    _required("waiting", pa.int64()),
)

SOLVER = _result_table(
    "solver",  # one row
    _required("now", TIMESTAMP),
    _required("status", pa.string()),  # models.result.SolverStatus
    _required("wall_time_s", pa.float64()),
    _required("limit_hit", pa.bool_()),
)

RESULT_TABLES: dict[str, pa.Schema] = {
    "scheduled": SCHEDULED,
    "environments_started": ENVIRONMENTS_STARTED,
    "failed": FAILED,
    "waiting": WAITING,
    "usage": USAGE,
    "queue_heads": QUEUE_HEADS,
    "solver": SOLVER,
}

# --- what-if comparison ---------------------------------------------------------------------------

ACTION_CHANGES = _result_table(
    "action_changes",  # actions whose outcome differs between baseline and variant
    _required("action", pa.string()),
    _required("queue", pa.string()),
    _required("before", pa.string()),  # running | scheduled | waiting | failed | absent
    _required("after", pa.string()),
    _optional("before_detail", pa.string()),  # cluster, wait reason or failure code
    _optional("after_detail", pa.string()),
)

USAGE_CHANGES = _result_table(
    "usage_changes",  # every usage row of either side, before next to after
    _required("queue", pa.string()),
    _required("kind", pa.string()),
    _required("resource", pa.string()),
    _optional("used_before", pa.int64()),  # null: the row exists on one side only
    _optional("used_after", pa.int64()),
    _optional("cap_before", pa.int64()),
    _optional("cap_after", pa.int64()),
    _required("changed", pa.bool_()),
)

HEAD_CHANGES = _result_table(
    "head_changes",  # every queue of either side, its head before next to after
    _required("queue", pa.string()),
    _optional("blocked_before", pa.bool_()),
    _optional("blocked_after", pa.bool_()),
    _optional("head_before", pa.string()),
    _optional("head_after", pa.string()),
    _required("change", pa.string()),  # blocked | unblocked | unchanged
)

COMPARISON_TABLES: dict[str, pa.Schema] = {
    "action_changes": ACTION_CHANGES,
    "usage_changes": USAGE_CHANGES,
    "head_changes": HEAD_CHANGES,
}

SWEEP = _result_table(
    "sweep",  # one row for the baseline, then one per variant, counted against the baseline
    _required("variant", pa.string()),  # `baseline` for the unchanged snapshot
    _required("changes", pa.string()),  # the variant's changes, `; `-separated
    _required("status", pa.string()),  # models.result.SolverStatus
    _required("scheduled", pa.int64()),
    _required("waiting", pa.int64()),
    _required("failed", pa.int64()),
    _required("newly_scheduled", pa.int64()),
    _required("newly_waiting", pa.int64()),
    _required("newly_failed", pa.int64()),
    _required("heads_blocked", pa.int64()),
    _required("heads_unblocked", pa.int64()),
    _required("solve_s", pa.float64()),
)

SWEEP_USAGE = _result_table(
    "sweep_usage",  # the usage table of the baseline and every variant, long format
    _required("variant", pa.string()),  # `baseline` for the unchanged snapshot
    _required("queue", pa.string()),
    _required("kind", pa.string()),
    _required("resource", pa.string()),
    _required("used", pa.int64()),
    _optional("cap", pa.int64()),
)
