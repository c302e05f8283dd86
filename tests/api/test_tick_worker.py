"""The tick out of the API process: the solve in a worker that is replaced when it dies or
hangs, and reads that never solve.

Issue 12: "The service solves in a separate worker process (or processes), fed by the
incremental problem, so the API's event loop and threads never wait on the solver or the
GIL."
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from api.config import TickWorker
from models.encoded import EncodedModels
from models.forecast import StartForecast
from models.result import TickResult, WaitingAction
from models.snapshot import Snapshot
from solver import tick
from tests.support.metrics import value
from tests.support.service import Service, service

# The worker imports these by name: engines sent to a process are module-level functions.
SLOW_TICK_S = 3.0


def slow_tick(snapshot: Snapshot) -> TickResult:
    time.sleep(SLOW_TICK_S)
    return tick(snapshot)


def hangs_while_a_queue_is_named_hang(snapshot: Snapshot) -> TickResult:
    if any(queue.name == "hang" for queue in snapshot.queues):
        time.sleep(3600)
    return tick(snapshot)


def _gang_with_a_blocked_head(svc: Service) -> None:
    gang = {"name": "gang", "max_gpus": 8, "scheduling": "strict_fifo"}
    svc.ok("POST", "/queues", gang, status=201)
    first = {"id": "g0", "queue": "gang", "containers": [{"resources": {"cpu": "1"}, "gpu": 6}]}
    svc.ok("POST", "/actions", first, status=201)
    svc.tick()
    for action, gpus in (("g1", 4), ("g2", 1)):
        body = {
            "id": action,
            "queue": "gang",
            "containers": [{"resources": {"cpu": "1"}, "gpu": gpus}],
        }
        svc.ok("POST", "/actions", body, status=201)
    svc.tick()


def _explanation_solves(svc: Service) -> float | None:
    return value(svc.http.get("/metrics").text, "sluice_explanation_solves_total")


def test_reads_of_a_blocked_queue_run_no_solve(svc: Service) -> None:
    """Issue 12: "The blocked-head explanation shown by `GET /queues/{name}` (and the banner)
    is computed once per tick by the worker and read from there; no read request triggers a
    solve. `GET /actions/{id}/explanation` may solve, but at most once per action per tick
    (cached)"."""
    _gang_with_a_blocked_head(svc)
    for _ in range(20):
        queue = svc.ok("GET", "/queues/gang")
        assert queue["head_action"] == "g1"
        assert queue["head_explanation"]["items"][0]["kind"] == "untyped_gpu_cap"
    streamed = svc.http.get("/watch/queues/gang", params={"limit": 1}).text
    assert '"head_explanation":{"action":"g1"' in streamed
    assert _explanation_solves(svc) == 0

    answers = [svc.ok("GET", "/actions/g1/explanation") for _ in range(5)]
    assert all(answer == answers[0] for answer in answers)
    assert answers[0]["code"] == "queue_cap"
    assert _explanation_solves(svc) == 1
    svc.tick()
    for _ in range(3):
        svc.ok("GET", "/actions/g1/explanation")
    assert _explanation_solves(svc) == 2


def _health(svc: Service) -> dict[str, object]:
    health: dict[str, object] = svc.http.get("/healthz").json()
    return health


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_the_next_tick_runs(tmp_path: Path) -> None:
    """Brief of issue 12 item 5: "A worker that crashes (kill -9 it in a test) is restarted
    and the next tick runs"."""
    with service(tmp_path, tick_worker=TickWorker.PROCESS, tick_fn=slow_tick) as svc:
        worker = _health(svc)["worker_pid"]
        assert isinstance(worker, int) and worker != os.getpid()
        ticking = threading.Thread(target=svc.tick)
        ticking.start()
        time.sleep(SLOW_TICK_S / 3)  # the worker is inside the tick
        os.kill(worker, signal.SIGKILL)
        ticking.join(timeout=30)
        health = svc.http.get("/healthz")
        assert health.status_code == 503
        assert "worker process died" in health.json()["last_error"]
        metrics = svc.http.get("/metrics").text
        assert value(metrics, "sluice_tick_workers_replaced_total") == 1

        svc.tick()
        health = svc.http.get("/healthz")
        assert health.status_code == 200
        assert health.json()["worker_pid"] not in (worker, os.getpid())


@pytest.mark.slow
def test_a_hung_tick_fails_and_its_worker_is_replaced(tmp_path: Path) -> None:
    """Brief of issue 12 item 5: "a tick that hangs past a bound is counted as a failure and
    the worker replaced"."""
    with service(
        tmp_path,
        tick_worker=TickWorker.PROCESS,
        tick_timeout_s=1.0,
        tick_fn=hangs_while_a_queue_is_named_hang,
    ) as svc:
        worker = _health(svc)["worker_pid"]
        svc.ok("POST", "/queues", {"name": "hang"}, status=201)
        svc.tick()
        health = svc.http.get("/healthz").json()
        assert "overran its 1 s bound" in health["last_error"]
        assert svc.app.state.ticker.stats.failures == 1

        svc.ok("DELETE", "/queues/hang", status=204)
        svc.tick()
        health = svc.http.get("/healthz").json()
        assert health["status"] == "ok"
        assert health["worker_pid"] not in (worker, None)


@pytest.mark.slow
def test_the_workers_read_the_store_themselves_and_see_a_move(tmp_path: Path) -> None:
    """The tick's and the explanations' workers read the store themselves and keep parsed
    actions between ticks; a move (made by the server) changes an action's queue, which they
    must see: issue 14's "move waiting actions" applies from the next tick."""
    with service(tmp_path, tick_worker=TickWorker.PROCESS) as svc:
        svc.ok("POST", "/queues", {"name": "full", "max_resources": {"cpu": "1"}}, status=201)
        svc.ok("POST", "/queues", {"name": "open"}, status=201)
        for action, cpu in (("first", "1"), ("second", "1"), ("huge", "2")):
            body = {"id": action, "queue": "full", "containers": [{"resources": {"cpu": cpu}}]}
            svc.ok("POST", "/actions", body, status=201)
        svc.tick()
        waits = svc.ok("GET", "/actions/second/explanation")
        assert (waits["state"], waits["code"]) == ("waiting", "queue_cap")
        failed = svc.ok("GET", "/actions/huge/explanation")
        assert (failed["state"], failed["code"]) == ("failed", "INFEASIBLE")

        moved = svc.ok("POST", "/queues/full/move", {"to": "open"})
        assert moved["ids"] == ["second"]
        svc.tick()
        second = svc.ok("GET", "/actions/second")
        assert (second["queue"], second["state"]) == ("open", "scheduled")
        placed = svc.ok("GET", "/actions/second/explanation")
        assert placed["state"] == "scheduled"


def _alive(model: type[object]) -> int:
    """How many `model`s are reachable in this process: an earlier test of the same worker
    may keep some (a module's cache), so a test compares counts rather than expect none."""
    gc.collect()
    return sum(isinstance(thing, model) for thing in gc.get_objects())


@pytest.mark.slow
def test_the_server_decodes_no_waiting_action_when_a_tick_comes_back(tmp_path: Path) -> None:
    """Issue 12: "The service solves in a separate worker process (or processes), fed by the
    incremental problem, so the API's event loop and threads never wait on the solver or the
    GIL." The hand-off too (D311): the worker sends each waiting action's entry and forecast
    as the JSON a read shows, and the server keeps them so; decoding every one held the
    server's GIL for about 80 ms a tick at 10,000 queued, while GETs waited. A read decodes
    the one entry it shows."""
    before = _alive(WaitingAction), _alive(StartForecast)
    with service(tmp_path, tick_worker=TickWorker.PROCESS) as svc:
        svc.ok("POST", "/queues", {"name": "full", "max_resources": {"cpu": "1"}}, status=201)
        batch = [
            {"id": f"w{i}", "queue": "full", "containers": [{"resources": {"cpu": "1"}}]}
            for i in range(300)
        ]
        svc.ok("POST", "/actions/batch", {"actions": batch}, status=201)
        svc.tick()
        ticker = svc.app.state.ticker
        assert isinstance(ticker.waiting, EncodedModels) and len(ticker.waiting) == 299
        assert isinstance(ticker.forecasts, EncodedModels) and len(ticker.forecasts) == 299
        assert (_alive(WaitingAction), _alive(StartForecast)) == before

        last = svc.ok("GET", "/actions/w299")
        assert (last["state"], last["waiting_reason"]) == ("queued", "queue_cap")
        assert last["queue_position"] == 299 and last["estimate_assumption"]
        queue = svc.ok("GET", "/queues/full")
        assert (queue["waiting"], queue["running_actions"]) == (299, 1)
