"""Reproducible answers: the same tick, idle and with both cores busy.

Issue 12, item 4: "The same snapshot and options give the same result, byte for byte, on an
idle machine and on a machine whose cores are both busy. Decisions may depend only on
deterministic work counts (CP-SAT deterministic time, counted operations), never on the wall
clock. [...] Test: run the same tick while another process keeps both cores busy, and
compare."

The scenario is the benchmark's synthetic generator at a fifth of M, with a budget small
enough that the tick reaches the model checks and then its limit: the point where a wall
clock would decide how far the checks get.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fixtures.generators.synthetic import Scale, synthetic
from models.result import TickResult
from solver import TickOptions, tick

SCALE = Scale("m/5", pending=2_000, running=200, queues=10, clusters=3, pools=20)
OPTIONS = TickOptions(time_limit_s=0.05)
BUSY_PROCESSES = 2  # the machine's two cores


@contextmanager
def busy_cores(processes: int) -> Iterator[None]:
    """Other processes spinning on every core while the block runs."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def timeless(result: TickResult) -> bytes:
    """The result as JSON without the timings, which are the only part allowed to differ."""
    data: dict[str, Any] = result.model_dump(mode="json")
    for timing in ("wall_time_s", "phases_s"):
        data["solver"].pop(timing)
    return json.dumps(data, sort_keys=True).encode()


@pytest.mark.slow
def test_the_same_tick_gives_the_same_answer_idle_and_with_both_cores_busy() -> None:
    snapshot = synthetic(SCALE)
    idle = tick(snapshot, OPTIONS)
    # The tick reaches the model checks and the deterministic limit, where the answer is cut.
    assert idle.solver.model_solves > 0 and idle.solver.limit_hit
    assert not idle.solver.wall_guard_hit
    with busy_cores(BUSY_PROCESSES):
        loaded = tick(snapshot, OPTIONS)
    assert timeless(loaded) == timeless(idle)


@pytest.mark.slow
def test_a_wall_clock_guard_is_off_by_default_and_flagged_apart_when_it_cuts() -> None:
    # "If the service needs a wall-clock guard to keep its period, it is a service setting,
    # it is off for `sluice solve`, what-if and explanations, and a tick cut by it says so in
    # `solver` (a separate flag from the deterministic limit)."
    assert TickOptions().wall_guard_s is None
    snapshot = synthetic(SCALE)
    cut = tick(snapshot, TickOptions(time_limit_s=5.0, wall_guard_s=1e-9))
    assert cut.solver.wall_guard_hit and not cut.solver.limit_hit
    assert cut.solver.status == "limit_reached"
    whole = tick(snapshot, TickOptions(time_limit_s=5.0))
    assert not whole.solver.wall_guard_hit
