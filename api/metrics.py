"""/metrics in the Prometheus text exposition format (no client library needed)."""

from __future__ import annotations

from collections.abc import Iterable

from api.schemas.job_queues import JobQueuePublic
from api.schemas.queues import QueuePublic
from api.ticker import TickStats
from models.limits import MAX_INT64
from models.quantity import CPU, parse_quantity
from models.resources import UNTYPED_GPU


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _in_base_units(resource: str, quantity: str) -> float:
    """Base units: cores for cpu, bytes for memory."""
    amount = parse_quantity(resource, quantity, resource, MAX_INT64)
    return amount / 1000 if resource == CPU else float(amount)


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.name = name

    def add(self, value: float, **labels: str) -> None:
        inner = ",".join(f'{key}="{_label(val)}"' for key, val in labels.items())
        self.lines.append(
            f"{self.name}{{{inner}}} {value:g}" if inner else f"{self.name} {value:g}"
        )


def render_metrics(queues: Iterable[QueuePublic], stats: TickStats) -> str:
    usage = _Family(
        "sluice_queue_in_flight",
        "gauge",
        "Requested by scheduled, unfinished actions (cpu in cores, memory in bytes, devices).",
    )
    caps = _Family("sluice_queue_cap", "gauge", "The queue's cap, in the same units.")
    waiting = _Family("sluice_queue_waiting", "gauge", "Actions waiting in the queue.")
    running = _Family("sluice_queue_running", "gauge", "Scheduled or running actions.")
    depth = _Family("sluice_queue_depth_used", "gauge", "In flight plus waiting.")
    blocked = _Family(
        "sluice_queue_head_blocked", "gauge", "1 when a strict_fifo queue's head is blocked."
    )
    draining = _Family("sluice_queue_draining", "gauge", "1 when the queue accepts nothing new.")
    blocked_total = 0
    for queue in queues:
        key = {"queue": queue.name, "pool": queue.pool}
        for resource, quantity in queue.in_flight_resources.items():
            usage.add(_in_base_units(resource, quantity), **key, resource=resource)
        for resource, quantity in queue.max_resources.items():
            caps.add(_in_base_units(resource, quantity), **key, resource=resource)
        for device, count in queue.accelerator_charges.items():
            usage.add(count, **key, resource=device)
        for device, count in queue.max_accelerators.items():
            caps.add(count, **key, resource=device)
        if queue.max_gpus is not None:
            caps.add(queue.max_gpus, **key, resource=UNTYPED_GPU)
        waiting.add(queue.waiting, **key)
        running.add(queue.running_actions, **key)
        depth.add(queue.depth_used, **key)
        blocked.add(int(queue.head_blocked), **key)
        draining.add(int(queue.draining), **key)
        blocked_total += queue.head_blocked
    blocked_count = _Family("sluice_queues_blocked", "gauge", "Queues whose head is blocked.")
    blocked_count.add(blocked_total)
    duration = _Family(
        "sluice_tick_duration_seconds", "gauge", "Wall time of the last tick (read, solve, write)."
    )
    duration.add(stats.last_duration_s)
    phases = _Family("sluice_tick_phase_seconds", "gauge", "The last tick's time per phase.")
    for phase, seconds in stats.phases_s.items():
        phases.add(seconds, phase=phase)
    ticks = _Family("sluice_ticks_total", "counter", "Ticks written back.")
    ticks.add(stats.ticks)
    failures = _Family("sluice_tick_failures_total", "counter", "Ticks that failed.")
    failures.add(stats.failures)
    overruns = _Family("sluice_tick_overruns_total", "counter", "Ticks longer than the period.")
    overruns.add(stats.overruns)
    overtaken = _Family(
        "sluice_ticks_overtaken_total",
        "counter",
        "Ticks not applied because the store changed since their snapshot.",
    )
    overtaken.add(stats.overtaken)
    rejected = _Family(
        "sluice_tick_rejected_actions_total",
        "counter",
        "Actions failed INFEASIBLE because a value of theirs is beyond what the engine can hold"
        " or their stored row no longer validates (each is logged).",
    )
    rejected.add(stats.rejected_actions)
    skipped = _Family(
        "sluice_tick_skipped_pools",
        "gauge",
        "Node pools the last tick left out: a value beyond what the engine can hold (logged).",
    )
    skipped.add(stats.skipped_pools)
    guarded = _Family(
        "sluice_tick_wall_guard_hits_total",
        "counter",
        "Ticks whose model checks the wall-clock guard cut (their answer depends on the load).",
    )
    guarded.add(stats.wall_guard_hits)
    families = (
        usage, caps, waiting, running, depth, blocked, draining, blocked_count,
        duration, phases, ticks, failures, overruns, overtaken, rejected, skipped, guarded,
    )  # fmt: skip
    return "\n".join(line for family in families for line in family.lines) + "\n"


def render_quota_metrics(queues: Iterable[JobQueuePublic]) -> str:
    """The quota-managed job queues: status, and per share its limit, use, borrowed, lent,
    live jobs and last tick's preemptions (instances are counts of one instance type)."""
    valid = _Family("sluice_job_queue_valid", "gauge", "1 when the job queue's status is VALID.")
    enabled = _Family("sluice_job_queue_enabled", "gauge", "1 when the job queue is ENABLED.")
    capacity = _Family(
        "sluice_job_queue_max_capacity", "gauge", "The service environment's most instances."
    )
    used_total = _Family("sluice_job_queue_used", "gauge", "Instances held (last tick).")
    limit = _Family("sluice_quota_share_limit", "gauge", "The share's own capacity limit.")
    used = _Family("sluice_quota_share_used", "gauge", "Instances the share holds (last tick).")
    borrowed = _Family(
        "sluice_quota_share_borrowed", "gauge", "Held beyond the share's limit (last tick)."
    )
    lent = _Family(
        "sluice_quota_share_lent", "gauge", "Of the share's limit, in another share's use."
    )
    jobs = _Family("sluice_quota_share_jobs", "gauge", "Live jobs of the share, by state.")
    preempted = _Family(
        "sluice_quota_share_preempted", "gauge", "Jobs of the share preempted by the last tick."
    )
    for queue in queues:
        valid.add(int(queue.status == "VALID"), job_queue=queue.name)
        enabled.add(int(queue.state == "ENABLED"), job_queue=queue.name)
        for kind, most in queue.max_capacity.items():
            capacity.add(most, job_queue=queue.name, instance_type=kind)
            used_total.add(queue.usage.get(kind, 0), job_queue=queue.name, instance_type=kind)
        for share in queue.shares:
            key = {"job_queue": queue.name, "share": share.name}
            for kind in sorted(share.capacity_limits.keys() | share.usage.keys()):
                limit.add(share.capacity_limits.get(kind, 0), **key, instance_type=kind)
                used.add(share.usage.get(kind, 0), **key, instance_type=kind)
                borrowed.add(share.borrowed.get(kind, 0), **key, instance_type=kind)
                lent.add(share.lent.get(kind, 0), **key, instance_type=kind)
            for state in ("queued", "scheduled", "running"):
                jobs.add(getattr(share, state), **key, state=state)
            preempted.add(sum(p.share == share.name for p in queue.preempted), **key)
    families = (valid, enabled, capacity, used_total, limit, used, borrowed, lent, jobs, preempted)
    return "\n".join(line for family in families for line in family.lines) + "\n"
