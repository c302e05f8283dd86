"""Run scenarios in worker processes, print the comparison tables, write the JSON."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def _worker(args: list[str], timeout_s: float) -> dict[str, Any]:
    """Run one bench.worker step from the repository root (where fixtures/ imports)."""
    command = [sys.executable, "-m", "bench.worker", *args]
    try:
        done = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"worker gave no answer within {timeout_s:.0f} s"}
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        return {"error": f"worker exited with {done.returncode}", "traceback": tail}
    return json.loads(done.stdout)


def _revision() -> str:
    """The commit measured, marked dirty when the engine's files differ from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" (solver/ modified)" if git("status", "--porcelain", "solver") else "")


def run_scenario(
    name: str, ticks: int, time_limit_s: float, profile: bool, timeout_s: float
) -> dict[str, Any]:
    wire = RESULTS / "wire" / f"{name}.json"
    report: dict[str, Any] = {"scenario": name}
    report.update(_worker(["generate", name, str(wire)], timeout_s))
    if "skipped" in report or "error" in report:
        return report
    args = ["measure", str(wire), str(ticks), str(time_limit_s)]
    if profile:
        args.append(str(RESULTS / f"{name}.prof"))
    report.update(_worker(args, timeout_s))
    return report


def run(
    scenarios: Sequence[str],
    ticks: int,
    time_limit_s: float,
    json_path: Path,
    profile: bool,
    echo: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Measure each scenario in its own processes, print the tables, write the JSON."""
    # Generous: a tick may take twice its limit plus the phases outside the solver.
    timeout_s = 900 + ticks * (3 * time_limit_s + 300)
    reports = []
    for name in scenarios:
        echo(f"-- {name}: generating, then {ticks} ticks (time limit {time_limit_s:g} s)")
        report = run_scenario(name, ticks, time_limit_s, profile, timeout_s)
        reports.append(report)
        for line in report.get("sluice", {}).get("profile", []):
            echo(line)
    echo("")
    echo(tables(reports))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(
        json.dumps(
            {
                "when": datetime.now(UTC).isoformat(timespec="seconds"),
                "revision": _revision(),
                "python": platform.python_version(),
                "machine": platform.machine(),
                "scenarios": reports,
            },
            indent=2,
        )
    )
    echo(f"\nwrote {json_path}")
    return reports


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def tables(reports: list[dict[str, Any]]) -> str:
    """Time, memory and quality side by side; a skipped or failed scenario says why."""
    timing, quality, notes = [], [], []
    for r in reports:
        name = r["scenario"]
        if "skipped" in r or "error" in r:
            notes.append(f"{name}: {r.get('skipped') or r.get('error')}")
            continue
        s, b = r["sluice"], r["baseline"]
        pending = str(r["sizes"]["pending"])
        if "error" in s:
            notes.append(f"{name}: engine failed: {s['error']}")
            timing.append([name, pending, "error", "", "", "", _s(b["tick_s"]["median"]), "", ""])
            continue
        phases = " ".join(f"{k}={v:.3f}" for k, v in s["phases_s"].items())
        timing.append(
            [
                name,
                pending,
                _s(s["tick_s"]["median"]),
                _s(s["tick_s"]["p95"]),
                _s(s["snapshot_s"]["median"]),
                phases,
                _s(b["tick_s"]["median"]),
                _x(r["ratios"]["tick_s"]),
                f"{r['peak_rss_mib']:.0f}",
            ]
        )
        quality.append(
            [
                name,
                s["solver"]["status"] + (" (limit)" if s["solver"]["limit_hit"] else ""),
                f"{s['actions']}/{b['actions']}",
                f"{s['gpus']}/{b['gpus']}",
                _x(r["ratios"]["gpus"]),
                f"{_pct(s['gpu_allocation'])}/{_pct(b['gpu_allocation'])}",
                f"{_pct(s['cpu_allocation'])}/{_pct(b['cpu_allocation'])}",
                f"{s['failed']}/{b['failed']}",
                f"{s['problems']}/{b['problems']}",
            ]
        )
        notes.extend(f"{name}: engine plan: {p}" for p in s["problem_examples"][:3])
    parts = []
    if timing:
        parts.append(
            "Tick time in seconds (median over ticks; engine phases are medians too)\n"
            + _table(
                [
                    "scenario",
                    "pending",
                    "sluice",
                    "p95",
                    "snapshot",
                    "engine phases",
                    "first-fit",
                    "ratio",
                    "peak MiB",
                ],
                timing,
            )
        )
    if quality:
        parts.append(
            "Admitted and allocated after the tick (Sluice/first-fit)\n"
            + _table(
                [
                    "scenario",
                    "status",
                    "actions",
                    "GPUs",
                    "GPU ratio",
                    "GPU alloc",
                    "CPU alloc",
                    "failed",
                    "plan problems",
                ],
                quality,
            )
        )
    if notes:
        parts.append("Notes\n" + "\n".join(notes))
    return "\n\n".join(parts)
