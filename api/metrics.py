"""/metrics through prometheus_client, on a registry of the app's own (never the global one).

Each scrape reads the store and the tick loop afresh (`SluiceCollector`); the tick duration
histogram is observed as each tick is written back (`ServiceMetrics.observe_tick`).

Two kinds of counter, documented per metric in docs/http-api.md:
- counted from the store (`sluice_actions_*_total`, `sluice_queue_wait_seconds`,
  `sluice_preemptions_total`): they count every row the database holds, so a restart keeps them;
- process counters (`sluice_ticks_total`, `sluice_tick_*_total`, the tick duration histogram):
  the tick loop's, they start at 0 with the process, as Prometheus' `rate()` expects of a
  counter that resets.

One unit per metric: cpu in cores, bytes (memory, ephemeral-storage, hugepages) by resource,
devices (typed accelerators and untyped `gpu`) by device, other named resources in their own
units by resource.

Adding a metric is one edit: a process counter of `TickStats` is one line in `TICK_COUNTERS`,
a gauge of it one in `TICK_GAUGES`, a per-queue gauge one in `QUEUE_GAUGES`, a per-job-queue
gauge one in `JOB_QUEUE_GAUGES`; anything else is one `yield` of a metric family in
`SluiceCollector.collect`.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import version

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from api.explanation_cache import ActionExplanations
from api.leader import Leadership
from api.schemas.job_queues import JobQueuePublic
from api.schemas.queues import QueuePublic
from api.store.records import Store
from api.ticker import TickLoop, TickStats
from api.views import job_queue_views, queue_views
from models.limits import MAX_INT64
from models.quantity import CPU, parse_quantity
from models.resources import UNTYPED_GPU, ResourceKind, kind_of

QUEUE_WAIT_BOUNDS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0)
TICK_DURATION_BOUNDS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# (name without `_total`, help, TickStats attribute): the tick loop's process counters.
TICK_COUNTERS = (
    ("sluice_ticks", "Ticks written back (process counter).", "ticks"),
    ("sluice_tick_failures", "Ticks that failed (process counter).", "failures"),
    ("sluice_tick_overruns", "Ticks longer than the period (process counter).", "overruns"),
    (
        "sluice_ticks_overtaken",
        "Ticks not applied because the store changed since their snapshot (process counter).",
        "overtaken",
    ),
    (
        "sluice_ticks_fenced",
        "Ticks not applied because another replica took the leader lease meanwhile (process"
        " counter).",
        "fenced",
    ),
    (
        "sluice_tick_rejected_actions",
        "Actions failed INFEASIBLE because a value of theirs is beyond what the engine can hold"
        " or their stored row no longer validates (each is logged; process counter).",
        "rejected_actions",
    ),
    (
        "sluice_tick_workers_replaced",
        "Tick workers that died or overran their bound and were replaced; each failed its"
        " tick (process counter).",
        "workers_replaced",
    ),
    (
        "sluice_tick_wall_guard_hits",
        "Ticks whose model checks the wall-clock guard cut: their answer depends on the load"
        " (process counter).",
        "wall_guard_hits",
    ),
)

# (name, help, value): gauges of the tick loop's state.
TICK_GAUGES: tuple[tuple[str, str, Callable[[TickStats], float]], ...] = (
    (
        "sluice_tick_failing",
        "1 while the last tick failed (/healthz is degraded).",
        lambda stats: int(stats.last_error is not None),
    ),
    (
        "sluice_tick_skipped_pools",
        "Node pools the last tick left out: a value beyond what the engine can hold (logged).",
        lambda stats: stats.skipped_pools,
    ),
    (
        "sluice_last_tick",
        "The number of the last tick any leader wrote back (ticks since the database began).",
        lambda stats: stats.last_number,
    ),
)

# (name, help, value): one gauge per queue, labelled queue and pool.
QUEUE_GAUGES: tuple[tuple[str, str, Callable[[QueuePublic], float]], ...] = (
    ("sluice_queue_waiting", "Actions waiting in the queue.", lambda q: q.waiting),
    ("sluice_queue_running", "Scheduled or running actions.", lambda q: q.running_actions),
    ("sluice_queue_depth_used", "In flight plus waiting.", lambda q: q.depth_used),
    (
        "sluice_queue_head_blocked",
        "1 when a strict_fifo queue's head is blocked.",
        lambda q: int(q.head_blocked),
    ),
    ("sluice_queue_draining", "1 when the queue accepts nothing new.", lambda q: int(q.draining)),
)

# (name, help, value): one gauge per job queue, labelled job_queue.
JOB_QUEUE_GAUGES: tuple[tuple[str, str, Callable[[JobQueuePublic], float]], ...] = (
    (
        "sluice_job_queue_valid",
        "1 when the job queue's status is VALID.",
        lambda q: int(q.status == "VALID"),
    ),
    (
        "sluice_job_queue_enabled",
        "1 when the job queue is ENABLED.",
        lambda q: int(q.state == "ENABLED"),
    ),
)

_QUEUE = ["queue", "pool"]
_BYTES = ("memory", "ephemeral-storage")


def _amount_metrics(prefix: str, what: str) -> dict[str, GaugeMetricFamily]:
    """The four families of one kind of amount (in flight, or the cap), one unit each."""
    return {
        "cores": GaugeMetricFamily(f"{prefix}_cpu_cores", f"{what}: cpu, in cores.", labels=_QUEUE),
        "bytes": GaugeMetricFamily(
            f"{prefix}_bytes",
            f"{what}: memory and storage, in bytes.",
            labels=[*_QUEUE, "resource"],
        ),
        "devices": GaugeMetricFamily(
            f"{prefix}_devices",
            f"{what}: accelerators by canonical device name (`gpu` for untyped GPUs).",
            labels=[*_QUEUE, "device"],
        ),
        "other": GaugeMetricFamily(
            f"{prefix}_units",
            f"{what}: other named resources, in each resource's own unit.",
            labels=[*_QUEUE, "resource"],
        ),
    }


def _add_amount(
    families: dict[str, GaugeMetricFamily], key: list[str], name: str, amount: str | int
) -> None:
    if kind_of(name) is not ResourceKind.NAMED:
        families["devices"].add_metric([*key, name], float(amount))
        return
    units = parse_quantity(name, amount, name, MAX_INT64)
    if name == CPU:
        families["cores"].add_metric(key, units / 1000)
    elif name in _BYTES or name.startswith("hugepages-"):
        families["bytes"].add_metric([*key, name], float(units))
    else:
        families["other"].add_metric([*key, name], float(units))


def _queue_metrics(queues: Iterable[QueuePublic]) -> Iterator[Metric]:
    in_flight = _amount_metrics(
        "sluice_queue_in_flight", "Requested by scheduled, unfinished actions"
    )
    caps = _amount_metrics("sluice_queue_cap", "The queue's cap")
    gauges = [
        (GaugeMetricFamily(name, text, labels=_QUEUE), value) for name, text, value in QUEUE_GAUGES
    ]
    depth = GaugeMetricFamily(
        "sluice_queue_depth_limit", "The queue's depth limit, when set.", labels=_QUEUE
    )
    blocked_since = GaugeMetricFamily(
        "sluice_queue_head_blocked_since_timestamp_seconds",
        "Since when a strict_fifo queue's head is blocked (Unix time; only while blocked).",
        labels=_QUEUE,
    )
    blocked_total = 0
    for queue in queues:
        key = [queue.name, queue.pool]
        for resource, quantity in queue.in_flight_resources.items():
            _add_amount(in_flight, key, resource, quantity)
        for device, count in queue.accelerator_charges.items():
            _add_amount(in_flight, key, device, count)
        for resource, quantity in queue.max_resources.items():
            _add_amount(caps, key, resource, quantity)
        for device, count in queue.max_accelerators.items():
            _add_amount(caps, key, device, count)
        if queue.max_gpus is not None:
            _add_amount(caps, key, UNTYPED_GPU, queue.max_gpus)
        for family, value in gauges:
            family.add_metric(key, value(queue))
        if queue.depth is not None:
            depth.add_metric(key, queue.depth)
        if queue.head_blocked_since is not None:
            blocked_since.add_metric(key, queue.head_blocked_since.timestamp())
        blocked_total += queue.head_blocked
    yield from in_flight.values()
    yield from caps.values()
    yield from (family for family, _ in gauges)
    yield depth
    yield blocked_since
    yield GaugeMetricFamily("sluice_queues_blocked", "Queues whose head is blocked.", blocked_total)


def _action_metrics(store: Store) -> Iterator[Metric]:
    """Counted from the store: they survive a restart."""
    totals = store.action_totals(QUEUE_WAIT_BOUNDS_S)
    submitted = CounterMetricFamily(
        "sluice_actions_submitted",
        "Actions submitted to the queue (from the store).",
        labels=["queue"],
    )
    scheduled = CounterMetricFamily(
        "sluice_actions_scheduled", "Actions the tick scheduled (from the store).", labels=["queue"]
    )
    failed = CounterMetricFamily(
        "sluice_actions_failed",
        "Actions failed, by error code (from the store; UNSPECIFIED when the executor gave none).",
        labels=["queue", "code"],
    )
    wait = HistogramMetricFamily(
        "sluice_queue_wait_seconds",
        "Seconds from submission to scheduling of scheduled actions (from the store).",
        labels=["queue"],
    )
    for queue, counted in sorted(totals.items()):
        submitted.add_metric([queue], counted.submitted)
        scheduled.add_metric([queue], counted.scheduled)
        for code, count in sorted(counted.failed.items()):
            failed.add_metric([queue, code], count)
        buckets = [
            (str(bound), count)
            for bound, count in zip(QUEUE_WAIT_BOUNDS_S, counted.wait_le, strict=True)
        ]
        wait.add_metric([queue], [*buckets, ("+Inf", counted.scheduled)], counted.wait_sum_s)
    yield from (submitted, scheduled, failed, wait)


def tick_metric_families(stats: TickStats) -> Iterator[Metric]:
    """The tick loop's metrics, from its stats alone (a test reads them without an app)."""
    for name, text, attribute in TICK_COUNTERS:
        yield CounterMetricFamily(name, text, getattr(stats, attribute))
    phases = GaugeMetricFamily(
        "sluice_tick_phase_seconds", "The last tick's time per phase.", labels=["phase"]
    )
    for phase, seconds in stats.phases_s.items():
        phases.add_metric([phase], seconds)
    yield phases
    for name, text, value in TICK_GAUGES:
        yield GaugeMetricFamily(name, text, value(stats))
    if stats.last_finished_at is not None:
        yield GaugeMetricFamily(
            "sluice_last_tick_timestamp_seconds",
            "When the last tick was written back, by any leader (Unix time).",
            stats.last_finished_at.timestamp(),
        )


def leader_metric_families(leadership: Leadership) -> Iterator[Metric]:
    """Whether this replica leads, and at which epoch (api.leader)."""
    epoch = leadership.current()
    yield GaugeMetricFamily(
        "sluice_leader",
        "1 while this replica holds the leader lease and ticks.",
        int(epoch is not None),
    )
    yield GaugeMetricFamily(
        "sluice_leader_epoch",
        "The lease epoch this replica last led at (0: never).",
        leadership.epoch or 0,
    )


def _quota_metrics(
    queues: Iterable[JobQueuePublic], preemptions: dict[str, int]
) -> Iterator[Metric]:
    """The quota-managed job queues: status, and per share its limit, use, borrowed, lent,
    live jobs and last tick's preemptions (instances are counts of one instance type)."""
    gauges = [
        (GaugeMetricFamily(name, text, labels=["job_queue"]), value)
        for name, text, value in JOB_QUEUE_GAUGES
    ]
    kinds = ["job_queue", "instance_type"]
    capacity = GaugeMetricFamily(
        "sluice_job_queue_max_capacity", "The service environment's most instances.", labels=kinds
    )
    used_total = GaugeMetricFamily(
        "sluice_job_queue_used", "Instances held (last tick).", labels=kinds
    )
    shares = ["job_queue", "share", "instance_type"]
    limit = GaugeMetricFamily(
        "sluice_quota_share_limit", "The share's own capacity limit.", labels=shares
    )
    used = GaugeMetricFamily(
        "sluice_quota_share_used", "Instances the share holds (last tick).", labels=shares
    )
    borrowed = GaugeMetricFamily(
        "sluice_quota_share_borrowed", "Held beyond the share's limit (last tick).", labels=shares
    )
    lent = GaugeMetricFamily(
        "sluice_quota_share_lent", "Of the share's limit, in another share's use.", labels=shares
    )
    jobs = GaugeMetricFamily(
        "sluice_quota_share_jobs",
        "Live jobs of the share, by state.",
        labels=["job_queue", "share", "state"],
    )
    preempted = GaugeMetricFamily(
        "sluice_quota_share_preempted",
        "Jobs of the share preempted by the last tick.",
        labels=["job_queue", "share"],
    )
    preemptions_total = CounterMetricFamily(
        "sluice_preemptions",
        "Jobs preempted in the job queue (from the store).",
        labels=["job_queue"],
    )
    for queue in queues:
        for family, value in gauges:
            family.add_metric([queue.name], value(queue))
        preemptions_total.add_metric([queue.name], preemptions.get(queue.name, 0))
        for kind, most in queue.max_capacity.items():
            capacity.add_metric([queue.name, kind], most)
            used_total.add_metric([queue.name, kind], queue.usage.get(kind, 0))
        for share in queue.shares:
            for kind in sorted(share.capacity_limits.keys() | share.usage.keys()):
                key = [queue.name, share.name, kind]
                limit.add_metric(key, share.capacity_limits.get(kind, 0))
                used.add_metric(key, share.usage.get(kind, 0))
                borrowed.add_metric(key, share.borrowed.get(kind, 0))
                lent.add_metric(key, share.lent.get(kind, 0))
            for state in ("queued", "scheduled", "starting", "running"):
                jobs.add_metric([queue.name, share.name, state], getattr(share, state))
            preempted.add_metric(
                [queue.name, share.name], sum(p.share == share.name for p in queue.preempted)
            )
    yield from (family for family, _ in gauges)
    yield from (
        capacity,
        used_total,
        limit,
        used,
        borrowed,
        lent,
        jobs,
        preempted,
        preemptions_total,
    )


class SluiceCollector(Collector):
    """Everything read at scrape time: the store's state and counts, the tick loop's stats."""

    def __init__(self, store: Store, ticker: TickLoop, explanations: ActionExplanations) -> None:
        self.store = store
        self.ticker = ticker
        self.explanations = explanations

    def collect(self) -> Iterator[Metric]:
        info = InfoMetricFamily("sluice_build", "The running Sluice.")
        info.add_metric([], {"version": version("sluice"), "python": platform.python_version()})
        yield info
        yield from _queue_metrics(queue_views(self.store, self.ticker))
        yield from _action_metrics(self.store)
        yield from tick_metric_families(self.ticker.stats)
        yield CounterMetricFamily(
            "sluice_explanation_solves",
            "Explanation solves run for GET /actions/{id}/explanation: at most one per action"
            " per tick (blocked heads are explained by the tick itself; process counter).",
            self.explanations.solves_run,
        )
        yield from leader_metric_families(self.ticker.leadership)
        yield from _quota_metrics(
            job_queue_views(self.store, self.ticker), self.store.preemption_totals()
        )


class ServiceMetrics:
    """The app's registry: Sluice's collector, the tick duration histogram, and the process
    and Python collectors of prometheus_client. One per app, so apps in one process (tests)
    never share a metric."""

    def __init__(self, store: Store, ticker: TickLoop, explanations: ActionExplanations) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(SluiceCollector(store, ticker, explanations))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._tick_duration = Histogram(
            "sluice_tick_duration_seconds",
            "Wall time of written-back ticks: read, solve, write (process histogram).",
            buckets=TICK_DURATION_BOUNDS_S,
            registry=self.registry,
        )
        ticker.on_tick.append(self.observe_tick)

    def observe_tick(self, stats: TickStats) -> None:
        self._tick_duration.observe(stats.last_duration_s)
