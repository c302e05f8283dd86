"""One scenario measured in this process: engine ticks, the first-fit baseline, memory.

A scenario is generated once into its wire form (the JSON a service would
receive). Each tick validates that JSON into a Snapshot, timed as the "snapshot
build", and then runs the engine, whose own phases come back in
result.solver.phases_s. Both sides are scored by bench.accounting, which also
checks the engine's placements.
"""

from __future__ import annotations

import cProfile
import io
import json
import math
import pstats
import resource
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

from bench.accounting import TickAssessment, assess
from bench.baseline import first_fit
from fixtures.generators import build
from models.errors import SluiceError
from models.snapshot import ActionState, Snapshot

PROFILE_LINES = 30


def summary(values: list[float]) -> dict[str, float]:
    """Median and p95 (nearest rank) of per-tick seconds."""
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p95": ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)],
        "min": ordered[0],
        "max": ordered[-1],
    }


def sizes(snapshot: Snapshot) -> dict[str, int]:
    running = sum(a.state is ActionState.RUNNING for a in snapshot.actions)
    pools = [p for c in snapshot.clusters for p in c.node_pools]
    return {
        "pending": len(snapshot.actions) - running,
        "running": running,
        "queues": len(snapshot.queues),
        "clusters": len(snapshot.clusters),
        "node_pools": len(pools),
        "nodes": sum(p.nodes for p in pools),
        "nodes_full_scale": sum(max(p.full_scale, p.nodes) for p in pools),
        "gpus_full_scale": sum(p.node.accelerators * max(p.full_scale, p.nodes) for p in pools),
        "environments": len(snapshot.environments),
    }


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _scores(outcome: TickAssessment) -> dict[str, Any]:
    return {
        "actions": outcome.actions,
        "gpus": outcome.gpus,
        "gpu_allocation": outcome.gpu_allocation,
        "cpu_allocation": outcome.cpu_allocation,
        "problems": len(outcome.problems),
        "problem_examples": outcome.problems[:10],
    }


def _engine(
    wire: dict[str, Any], ticks: int, time_limit_s: float, profile: Path | None
) -> dict[str, Any]:
    from solver import TickOptions, tick  # the engine is what is measured; import it late

    options = TickOptions(time_limit_s=time_limit_s)
    snapshot_s, tick_s, wall_s = [], [], []
    phases: dict[str, list[float]] = {}
    result = snapshot = None
    for _ in range(ticks):
        started = time.perf_counter()
        snapshot = Snapshot.model_validate(wire)
        built = time.perf_counter()
        result = tick(snapshot, options)
        tick_s.append(time.perf_counter() - built)
        snapshot_s.append(built - started)
        wall_s.append(result.solver.wall_time_s)
        for name, seconds in result.solver.phases_s.items():
            phases.setdefault(name, []).append(seconds)
    assert result is not None and snapshot is not None
    report: dict[str, Any] = {
        "tick_s": summary(tick_s),
        "snapshot_s": summary(snapshot_s),
        "engine_wall_s": summary(wall_s),
        "phases_s": {name: statistics.median(values) for name, values in phases.items()},
        "solver": result.solver.model_dump(mode="json", exclude={"phases_s"}),
        "failed": len(result.failed),
        "waiting": len(result.waiting),
        **_scores(assess(snapshot, result.scheduled, result.environments_started)),
    }
    if profile is not None:
        report["profile"] = _profile(snapshot, options, profile)
    return report


def _profile(snapshot: Snapshot, options: Any, path: Path) -> list[str]:
    """cProfile one more tick; write the stats file and return the top lines by own time."""
    from solver import tick

    profiler = cProfile.Profile()
    profiler.enable()
    tick(snapshot, options)
    profiler.disable()
    path.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(str(path))
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(PROFILE_LINES)
    stats.sort_stats("cumulative").print_stats(r"solver", PROFILE_LINES)
    return text.getvalue().splitlines()


def _baseline(wire: dict[str, Any], ticks: int) -> dict[str, Any]:
    decide_s = []
    plan = snapshot = None
    for _ in range(ticks):
        snapshot = Snapshot.model_validate(wire)
        plan = first_fit(snapshot)
        decide_s.append(plan.decide_s)
    assert plan is not None and snapshot is not None
    return {
        "tick_s": summary(decide_s),
        "failed": len(plan.failed),
        **_scores(assess(snapshot, plan.scheduled, plan.environments_started)),
    }


def _failure(error: BaseException) -> dict[str, str]:
    if isinstance(error, SluiceError):
        return {"error": f"{error.code}: {error.message}"}
    return {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}


def generate(name: str, path: Path) -> dict[str, Any]:
    """Build scenario `name` and write its wire form (JSON) to `path`; report its sizes."""
    started = time.perf_counter()
    try:
        snapshot = build(name)
    except SluiceError as error:  # the trace folder is absent, say
        return {"skipped": f"{error.code}: {error.message}"}
    generate_s = time.perf_counter() - started
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(snapshot.model_dump(mode="json", exclude_none=True)))
    return {"generate_s": generate_s, "sizes": sizes(snapshot)}


def measure(
    wire_path: Path, ticks: int, time_limit_s: float, profile: Path | None = None
) -> dict[str, Any]:
    """Tick the scenario at `wire_path` `ticks` times with the engine, then with the baseline.

    Run it in a fresh process: the peak RSS it reports is that process's, from
    reading the JSON through the last engine tick (the baseline runs after it).
    """
    wire = json.loads(wire_path.read_text())
    report: dict[str, Any] = {"ticks": ticks, "time_limit_s": time_limit_s}
    report["rss_before_ticks_mib"] = _rss_mib()
    try:
        report["sluice"] = _engine(wire, ticks, time_limit_s, profile)
    except Exception as error:  # a crash of the engine is a result to report, not to hide
        report["sluice"] = _failure(error)
    report["peak_rss_mib"] = _rss_mib()
    report["baseline"] = _baseline(wire, ticks)
    sluice, baseline = report["sluice"], report["baseline"]
    if "error" not in sluice:
        report["ratios"] = {
            "tick_s": _ratio(sluice["tick_s"]["median"], baseline["tick_s"]["median"]),
            "actions": _ratio(sluice["actions"], baseline["actions"]),
            "gpus": _ratio(sluice["gpus"], baseline["gpus"]),
            "gpu_allocation": _ratio(sluice["gpu_allocation"], baseline["gpu_allocation"]),
            "cpu_allocation": _ratio(sluice["cpu_allocation"], baseline["cpu_allocation"]),
        }
    return report


def _ratio(ours: float, theirs: float) -> float | None:
    return ours / theirs if theirs else None
