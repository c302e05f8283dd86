"""Every Arrow table Sluice writes or reads, as one explicit schema each.

A snapshot is the whole input of one tick as twelve tables (seven for the
capped queues, five for the quota-managed job queues); a tick result is
thirteen more (six of them for the job queues); a what-if comparison adds
three and a sweep two. Tables are always built against these constants, never
by type inference, and every schema carries its version and table name in the
metadata so a reader can refuse a file it does not understand (docs/arrow/tables.md
is generated from these constants and describes each column).

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
- Version 2 added the quota-managed job queues (models.quota): scheduling
  policies, service environments, job queues, their quota shares (one row per
  share, in each queue's order) and jobs (row order is arrival order). A
  version-1 snapshot has none of those tables and reads as having no job queues.
  Capacity limits are `map<string, int64>` (instance type to count), like caps.
- Version 3 added three columns to `actions`, what forecasts read: `task`,
  `expected_duration` and a running action's `started_at`; an older snapshot reads
  them as null.
"""

from __future__ import annotations

import pyarrow as pa

SNAPSHOT_VERSION = "3"
RESULT_VERSION = "2"
TRACE_VERSION = "1"
SNAPSHOT_VERSION_KEY = b"sluice.snapshot.version"
RESULT_VERSION_KEY = b"sluice.result.version"
TRACE_VERSION_KEY = b"sluice.trace.version"
TABLE_KEY = b"sluice.table"

TIMESTAMP = pa.timestamp("us", tz="UTC")
DURATION = pa.duration("us")
AMOUNTS = pa.map_(pa.string(), pa.int64())
"""Resource (or canonical device) to an amount in solver units."""
LABELS = pa.map_(pa.string(), pa.string())
CAPACITY_LIMITS = pa.map_(pa.string(), pa.int64())
"""SageMaker Training instance type (`ml.g5.xlarge`) to the most instances of it."""


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
    _optional("task", pa.string()),  # version 3: the stored task it was submitted as
    _optional("expected_duration", DURATION),  # version 3: the submitter's estimate
    _optional("started_at", TIMESTAMP),  # version 3: when a running action started
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

# Quota-managed job queues (version 2). Enumerations are written as their models spell them.

SCHEDULING_POLICIES = _snapshot_table(
    "scheduling_policies",
    _required("name", pa.string()),
    # the quota share policy's idle_resource_assignment_strategy (FIFO); null: the policy has
    # no quota share policy (a job queue using it is INVALID)
    _optional("quota_share_policy", pa.string()),
)

SERVICE_ENVIRONMENTS = _snapshot_table(
    "service_environments",
    _required("name", pa.string()),
    _required("type", pa.string()),  # SAGEMAKER_TRAINING
    _required("capacity_limits", CAPACITY_LIMITS),
)

JOB_QUEUES = _snapshot_table(
    "job_queues",
    _required("name", pa.string()),
    _required("type", pa.string()),  # SAGEMAKER_TRAINING
    _required("state", pa.string()),  # ENABLED | DISABLED
    _required("scheduling_policy", pa.string()),
    _required("service_environment", pa.string()),
)

QUOTA_SHARES = _snapshot_table(
    "quota_shares",  # one row per share; a job queue's shares in row order
    _required("job_queue", pa.string()),
    _required("name", pa.string()),  # unique within its job queue
    _required("capacity_limits", CAPACITY_LIMITS),  # 1 to 5 instance types
    _required("strategy", pa.string()),  # RESERVE | LEND | LEND_AND_BORROW
    _optional("borrow_limit", pa.int64()),  # percent; null (or -1): unlimited
    _required("in_share_preemption", pa.bool_()),
)

JOBS = _snapshot_table(
    "jobs",  # row order is arrival order (with submitted_at)
    _required("id", pa.string()),
    _required("job_queue", pa.string()),
    _required("share", pa.string()),
    _required("priority", pa.int64()),  # 0..9999, higher first
    _required("instance_type", pa.string()),
    _required("count", pa.int64()),  # instances, at least 1
    _required("state", pa.string()),  # QUEUED | SCHEDULED | STARTING | RUNNING
    _required("submitted_at", TIMESTAMP),
    _optional("started_at", TIMESTAMP),  # when it got capacity; null exactly when QUEUED
)

QUOTA_SNAPSHOT_TABLES: dict[str, pa.Schema] = {
    "scheduling_policies": SCHEDULING_POLICIES,
    "service_environments": SERVICE_ENVIRONMENTS,
    "job_queues": JOB_QUEUES,
    "quota_shares": QUOTA_SHARES,
    "jobs": JOBS,
}

SNAPSHOT_TABLES: dict[str, pa.Schema] = {
    "settings": SETTINGS,
    "queues": QUEUES,
    "clusters": CLUSTERS,
    "environments": ENVIRONMENTS,
    "actions": ACTIONS,
    "containers": CONTAINERS,
    "placements": PLACEMENTS,
    **QUOTA_SNAPSHOT_TABLES,
}
"""Every snapshot table, in the order a stream carries them."""

TABLES_OF_VERSION: dict[str, tuple[str, ...]] = {
    "1": tuple(name for name in SNAPSHOT_TABLES if name not in QUOTA_SNAPSHOT_TABLES),
    "2": tuple(SNAPSHOT_TABLES),
    SNAPSHOT_VERSION: tuple(SNAPSHOT_TABLES),
}
"""The snapshot tables of every version this reader knows; a snapshot's tables share one."""

COLUMNS_SINCE: dict[tuple[str, str], str] = {
    ("actions", "task"): "3",
    ("actions", "expected_duration"): "3",
    ("actions", "started_at"): "3",
}
"""Columns a later version added to a table: a table of an earlier version reads them as null."""

# Columns holding quantities: `resource` names the unit for a scalar column; None is a map
# column whose keys name the resource.
QUANTITY_COLUMNS: dict[tuple[str, str], str | None] = {
    ("queues", "max_resources"): None,
    ("clusters", "node_cpu"): "cpu",
    ("clusters", "node_memory"): "memory",
    ("clusters", "node_resources"): None,
    ("containers", "resources"): None,
}

# Map columns of caps: their amounts may exceed what one container or node has.
CAP_COLUMNS: frozenset[tuple[str, str]] = frozenset(
    {("queues", "max_resources"), ("queues", "max_accelerators")}
)

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

# The quota-managed job queues' part of a tick (models.quota_result); empty without job queues.

QUOTA_SCHEDULED = _result_table(
    "quota_scheduled",  # jobs given their instances, in admission order
    _required("job", pa.string()),
    _required("job_queue", pa.string()),
    _required("share", pa.string()),
    _required("instance_type", pa.string()),
    _required("count", pa.int64()),
)

QUOTA_PREEMPTED = _result_table(
    "quota_preempted",  # jobs stopped and put back in their share's line
    _required("job", pa.string()),
    _required("job_queue", pa.string()),
    _required("share", pa.string()),
    _required("instance_type", pa.string()),
    _required("count", pa.int64()),
    _required("reason", pa.string()),  # models.quota_result.PreemptReason
    _optional("beneficiary", pa.string()),  # the job it made room for; null: nobody
    _required("message", pa.string()),
    _required("position", pa.int64()),  # its place in its share's line after the tick
)

QUOTA_WAITING = _result_table(
    "quota_waiting",
    _required("job", pa.string()),
    _required("job_queue", pa.string()),
    _required("share", pa.string()),
    _required("reason", pa.string()),  # models.quota_result.JobWaitReason
    _required("message", pa.string()),
    _required("position", pa.int64()),
)

QUOTA_FAILED = _result_table(
    "quota_failed",
    _required("job", pa.string()),
    _required("job_queue", pa.string()),
    _required("share", pa.string()),
    _required("code", pa.string()),  # models.errors.ErrorCode
    _required("message", pa.string()),
)

QUOTA_USAGE = _result_table(
    "quota_usage",  # per share, one row per instance type it limits or holds
    _required("job_queue", pa.string()),
    _required("share", pa.string()),
    _required("strategy", pa.string()),
    _required("instance_type", pa.string()),
    _required("capacity_limit", pa.int64()),  # 0: the share has no limit for the type
    _optional("borrow_limit", pa.int64()),  # percent; null: unlimited or not borrowing
    _required("used", pa.int64()),
    _required("borrowed", pa.int64()),  # held beyond its limit
    _required("lent", pa.int64()),  # of its limit, in another share's use
    _required("queued", pa.int64()),  # jobs in its line (preempted ones included)
)

QUOTA_JOB_QUEUES = _result_table(
    "quota_job_queues",  # per job queue, one row per instance type of its environment
    _required("job_queue", pa.string()),
    _required("state", pa.string()),  # ENABLED | DISABLED
    _required("status", pa.string()),  # VALID | INVALID
    _required("reason", pa.string()),  # "JobQueue Healthy", or why INVALID
    _required("service_environment", pa.string()),
    _required("instance_type", pa.string()),
    _required("max_capacity", pa.int64()),
    _required("used", pa.int64()),
    _required("unassigned_used", pa.int64()),  # borrowed from capacity no share is given
)

RESULT_TABLES: dict[str, pa.Schema] = {
    "scheduled": SCHEDULED,
    "environments_started": ENVIRONMENTS_STARTED,
    "failed": FAILED,
    "waiting": WAITING,
    "usage": USAGE,
    "queue_heads": QUEUE_HEADS,
    "solver": SOLVER,
    "quota_scheduled": QUOTA_SCHEDULED,
    "quota_preempted": QUOTA_PREEMPTED,
    "quota_waiting": QUOTA_WAITING,
    "quota_failed": QUOTA_FAILED,
    "quota_usage": QUOTA_USAGE,
    "quota_job_queues": QUOTA_JOB_QUEUES,
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


# --- replay: the trace it reads, the tables it writes (solver.replay) ---------------------------

TRACE = _schema(
    "trace",  # one row per action; row order breaks ties between equal submit times
    TRACE_VERSION_KEY,
    TRACE_VERSION,
    _required("id", pa.string()),
    _required("queue", pa.string()),
    _optional("submit_s", pa.float64()),  # seconds from the trace start ...
    _optional("submitted_at", TIMESTAMP),  # ... or a time (one form for the whole trace)
    _required("duration_s", pa.float64()),
    _optional("containers", pa.int64()),  # identical containers; null: 1
    _optional("cpu", pa.string()),  # per container, spelled as in scenario files
    _optional("memory", pa.string()),
    _optional("gpu", pa.string()),
    _optional("environment", pa.string()),  # runs in this reusable pool (no requests then)
    _optional("max_queued_time_s", pa.float64()),
    _optional("deadline_s", pa.float64()),  # seconds after submission
    _optional("expected_duration_s", pa.float64()),  # the submitter's estimate of duration_s
)

REPLAY_ACTIONS = _result_table(
    "replay_actions",  # one row per trace action, in trace order
    _required("id", pa.string()),
    _required("queue", pa.string()),
    _required("submitted_at", TIMESTAMP),
    _optional("started_at", TIMESTAMP),
    _optional("finished_at", TIMESTAMP),
    _optional("waited_s", pa.float64()),
    _required("outcome", pa.string()),
)

REPLAY_TICKS = _result_table(
    "replay_ticks",  # one row per simulated tick
    _required("tick", pa.int64()),
    _required("time", TIMESTAMP),
    _required("queued", pa.int64()),
    _required("running", pa.int64()),
    _required("started", pa.int64()),
    _required("failed", pa.int64()),
    _required("gpu_allocated", pa.int64()),
    _required("gpu_capacity", pa.int64()),
    _required("cpu_allocated", pa.int64()),
    _required("cpu_capacity", pa.int64()),
    _required("head_blocked", pa.list_(pa.string())),
    _required("queue_gpus", pa.map_(pa.string(), pa.int64())),
)

REPLAY_TABLES: dict[str, pa.Schema] = {
    "replay_actions": REPLAY_ACTIONS,
    "replay_ticks": REPLAY_TICKS,
}
