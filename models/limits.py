"""The largest value every quantity, count and integer setting may take, in one place.

Each limit is far beyond what a real fleet uses, and small enough that the engine
(numpy int64 arrays, CP-SAT's int64 linear expressions) can hold the value, and sums
of many such values, without overflowing. Solver units throughout: cpu in millicores,
memory and every other named resource in base units (bytes for memory). A value out
of range is refused where it is parsed (HTTP, CLI, scenario files, Arrow) with an
INVALID_ARGUMENT naming the field and the limit.

The arithmetic the limits keep in int64 (2**63):
- one pool's full-scale room is room per node × nodes: at most 2**50 × 100,000 < 2**67,
  so a cluster's room is bounded on its own (MAX_CLUSTER_ROOM = 2**58, summed over its
  pools at full scale); the solver's "no such resource" room (solver.placement.problem
  UNBOUNDED, 2**61) stays above any cluster, and seven clusters at the limit still sum
  below it.
- requests: 4096 replicas × 2**50 bytes = 2**62, so an environment at its limits sums
  within int64; caps are at most MAX_CAP = MAX_CLUSTER_ROOM, as a cap above the largest
  cluster caps nothing.
- durations: submitted_at + 100 years stays far inside datetime's range (year 9999).

What limits on single values cannot bound: the sum of the requests of many actions (8,192
actions of 1Pi each reach 2**63). Code that sums requests must not assume int64 holds any
sum; a tick that still cannot compile one action is the tick's problem, not the parser's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

MAX_CPU_CORES = 2**20
"""cpu of one container or node: 1,048,576 cores (the largest machines have a few thousand)."""
MAX_CPU_MILLICORES = MAX_CPU_CORES * 1000

MAX_AMOUNT = 2**50
"""memory (bytes) and any other named resource (base units) of one container or node: 1Pi.
The largest single machines sold have 32 TiB (2**45)."""

MAX_ACCELERATORS = 2**16
"""Accelerators one container asks for or one node holds: 65,536 (nodes hold 8 or 16)."""

MAX_NODES = 100_000
"""Nodes of one pool, now or at full scale (Kubernetes clusters top out near 65,000 nodes)."""

MAX_CLUSTER_ROOM = 2**58
"""One cluster's room of one resource, every pool at full scale: 256Pi of memory."""

MAX_CAP = MAX_CLUSTER_ROOM
"""A queue's cap of one resource (max_resources), of untyped GPUs (max_gpus) or of one device
(max_accelerators)."""

MAX_REPLICAS = 4096
"""Containers of one reusable environment."""

MAX_QUEUE_COUNT = 2**20
"""A queue's depth, run_concurrency and action_concurrency: 1,048,576 (a batch holds 10,000)."""

MAX_QUEUE_PRIORITY = 10**6
"""A queue's priority lies in -MAX_QUEUE_PRIORITY..MAX_QUEUE_PRIORITY."""

MAX_INSTANCES = 100_000
"""Instances of one type in a capacity limit (service environment or quota share), and per job."""

MAX_BORROW_PERCENT = 100_000
"""A quota share's borrow limit, percent of its own limits (1000 times its own capacity)."""

MAX_DURATION = timedelta(days=36_500)
"""max_queued_time and a relative deadline: 100 years."""

MAX_EXPECTED_DURATION = timedelta(days=366)
"""An action's expected_duration: a year (a forecast's horizon is far shorter)."""

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
"""Every time (now, submitted_at, a deadline) lies in this range, so a duration added to it
stays inside datetime's (which ends with year 9999)."""

MAX_INT64 = 2**63 - 1
"""What a total Sluice computed and printed itself (a queue's usage) may reach when read back."""

MAX_SPELLING = 64
"""Characters of one quantity or count as written ("64Gi", "H100:8"); longer is no quantity."""
