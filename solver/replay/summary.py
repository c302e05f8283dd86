"""What a replay found: its Arrow tables (models.arrow.schema.REPLAY_TABLES) and a summary
per queue and overall (wait percentiles, time head-blocked, allocation, failures, makespan)."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from models.arrow.schema import REPLAY_ACTIONS, REPLAY_TICKS
from solver.replay.simulate import (
    NOT_ARRIVED,
    STILL_QUEUED,
    STILL_RUNNING,
    SUCCEEDED,
    ActionRecord,
    Replay,
)

OVERALL = "(all)"
PERCENTILES = (50, 90, 99)


def replay_tables(result: Replay) -> dict[str, pa.Table]:
    actions = result.actions
    ticks = result.ticks
    return {
        "replay_actions": pa.Table.from_pydict(
            {
                "id": [a.id for a in actions],
                "queue": [a.queue for a in actions],
                "submitted_at": [a.submitted_at for a in actions],
                "started_at": [a.started_at for a in actions],
                "finished_at": [a.finished_at for a in actions],
                "waited_s": [a.waited_s for a in actions],
                "outcome": [a.outcome for a in actions],
            },
            schema=REPLAY_ACTIONS,
        ),
        "replay_ticks": pa.Table.from_pydict(
            {
                "tick": list(range(len(ticks))),
                "time": [t.time for t in ticks],
                "queued": [t.queued for t in ticks],
                "running": [t.running for t in ticks],
                "started": [t.started for t in ticks],
                "failed": [t.failed for t in ticks],
                "gpu_allocated": [t.gpu_allocated for t in ticks],
                "gpu_capacity": [result.gpu_capacity] * len(ticks),
                "cpu_allocated": [t.cpu_allocated for t in ticks],
                "cpu_capacity": [result.cpu_capacity] * len(ticks),
                "head_blocked": [list(t.head_blocked) for t in ticks],
                "queue_gpus": [list(t.queue_gpus.items()) for t in ticks],
            },
            schema=REPLAY_TICKS,
        ),
    }


def summarize(result: Replay) -> dict[str, Any]:
    """Per queue (and `(all)`): counts, waits, head-blocked seconds; overall: allocation and
    makespan. Time-weighted figures weigh each tick by the time until the next one."""
    queues = sorted({a.queue for a in result.actions})
    spans = _tick_spans(result)
    blocked: defaultdict[str, float] = defaultdict(float)
    for tick, span in zip(result.ticks, spans, strict=True):
        for queue in tick.head_blocked:
            blocked[queue] += span
    per_queue = {
        name: _queue_summary([a for a in result.actions if a.queue == name], blocked[name])
        for name in queues
    }
    per_queue[OVERALL] = _queue_summary(result.actions, sum(blocked.values()))
    finished = [a.finished_at for a in result.actions if a.finished_at is not None]
    total = sum(spans)
    return {
        "start": result.start.isoformat(),
        "end": result.end.isoformat(),
        "ticks": len(result.ticks),
        "makespan_s": (max(finished) - result.start).total_seconds() if finished else 0.0,
        "gpu_capacity": result.gpu_capacity,
        "cpu_capacity_millicores": result.cpu_capacity,
        "mean_gpu_allocated": _weighted([t.gpu_allocated for t in result.ticks], spans, total),
        "mean_cpu_allocated_millicores": _weighted(
            [t.cpu_allocated for t in result.ticks], spans, total
        ),
        "queues": per_queue,
    }


def summary_text(summary: dict[str, Any]) -> str:
    gpu_share = _share(summary["mean_gpu_allocated"], summary["gpu_capacity"])
    cpu_share = _share(summary["mean_cpu_allocated_millicores"], summary["cpu_capacity_millicores"])
    lines = [
        f"replayed {summary['start']} to {summary['end']}: {summary['ticks']} ticks,"
        f" makespan {summary['makespan_s']:.0f}s",
        f"allocated on average: GPU {gpu_share}, CPU {cpu_share}",
        "",
        f"{'queue':<20} {'actions':>7} {'ok':>6} {'failed':>6} {'left':>5}"
        f" {'wait p50':>9} {'p90':>9} {'p99':>9} {'head-blocked':>12}",
    ]
    for name, queue in summary["queues"].items():
        waits = queue["wait_s"]
        lines.append(
            f"{name:<20} {queue['actions']:>7} {queue['succeeded']:>6}"
            f" {sum(queue['failed'].values()):>6} {queue['running'] + queue['queued']:>5}"
            + "".join(f" {_seconds(waits[f'p{p}']):>9}" for p in PERCENTILES)
            + f" {_seconds(queue['head_blocked_s']):>12}"
        )
    failures: Counter[str] = Counter(summary["queues"][OVERALL]["failed"])
    if failures:
        lines += [
            "",
            "failed by code: " + ", ".join(f"{c} {n}" for c, n in sorted(failures.items())),
        ]
    return "\n".join(lines) + "\n"


def _queue_summary(actions: list[ActionRecord], head_blocked_s: float) -> dict[str, Any]:
    outcomes = Counter(a.outcome for a in actions)
    waits = np.array([a.waited_s for a in actions if a.started_at is not None], dtype=float)
    return {
        "actions": len(actions),
        "succeeded": outcomes.pop(SUCCEEDED, 0),
        "running": outcomes.pop(STILL_RUNNING, 0),
        "queued": outcomes.pop(STILL_QUEUED, 0),
        "not_arrived": outcomes.pop(NOT_ARRIVED, 0),
        "failed": dict(sorted(outcomes.items())),
        "wait_s": {
            f"p{p}": float(np.percentile(waits, p)) if waits.size else None for p in PERCENTILES
        },
        "head_blocked_s": head_blocked_s,
    }


def _tick_spans(result: Replay) -> list[float]:
    times: list[datetime] = [t.time for t in result.ticks] + [result.end]
    return [max((b - a).total_seconds(), 0.0) for a, b in pairwise(times)]


def _weighted(values: list[int], spans: list[float], total: float) -> float:
    if total <= 0:
        return float(np.mean(values)) if values else 0.0
    return float(np.dot(values, spans) / total)


def _share(amount: float, capacity: int) -> str:
    return f"{amount / capacity:.0%}" if capacity else "n/a"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}s"
