"""kill -9 a real server under load, restart it on the same file, and check the promises."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import httpx
import pytest

from api.client import Action, FleetConfig, Queue, SluiceClient
from fixtures.service_fleets import EAST_SMALL
from models.errors import SluiceError
from models.quantity import parse_quantity
from tests.support.service import every_action, start_server

CPU_CAP, H100_CAP = 16, 8


def _charges(actions: list[dict]) -> tuple[int, int]:
    """cpu (millicores) and H100s requested by scheduled, unfinished actions."""
    cpu = gpus = 0
    for action in actions:
        for container in action["containers"]:
            cpu += parse_quantity("cpu", container["resources"].get("cpu", "0"), "cpu")
            gpu = container.get("gpu")
            if gpu:
                gpus += int(str(gpu).rsplit(":", 1)[1])
    return cpu, gpus


def _live(client: SluiceClient) -> list[dict]:
    return [
        action
        for state in ("scheduled", "running")
        for action in Action.list(queue="capped", state=state, limit=10_000, client=client)
    ]


@pytest.mark.slow
def test_kill_9_under_load_loses_nothing_and_schedules_nothing_twice(tmp_path: Path) -> None:
    """Issue: "After `kill -9` and a restart, nothing acknowledged is lost, nothing is
    scheduled twice, and no cap is exceeded." """
    db = tmp_path / "crash.db"
    server = start_server(db, period_s=0.1)
    try:
        admin = SluiceClient(server.url)  # ready: its solver workers have imported
        FleetConfig.put_cluster(EAST_SMALL, client=admin)
        Queue.create(
            "capped",
            max_resources={"cpu": str(CPU_CAP)},
            max_accelerators={"H100": H100_CAP},
            client=admin,
        )
        acknowledged: set[str] = set()
        stop = threading.Event()

        def submitter(worker: int) -> None:
            client, rng = SluiceClient(server.url, timeout_s=5), random.Random(worker)
            for index in range(100_000):
                if stop.is_set():
                    return
                action_id = f"w{worker}-{index}"
                gpu = f"H100:{rng.choice([1, 2])}" if rng.random() < 0.3 else None
                try:
                    Action.submit(
                        queue="capped",
                        id=action_id,
                        resources={"cpu": str(rng.choice([1, 2, 4])), "memory": "1Gi"},
                        gpu=gpu,
                        client=client,
                    )
                except SluiceError:
                    return  # the server is gone
                acknowledged.add(action_id)

        def executor() -> None:
            """Finishes about half of what is scheduled, so capacity churns."""
            client, rng = SluiceClient(server.url, timeout_s=5), random.Random(99)
            while not stop.is_set():
                try:
                    for action in Action.list(state="scheduled", limit=500, client=client):
                        if rng.random() < 0.5:
                            Action.report(action["id"], "succeeded", client=client)
                except SluiceError:
                    return
                time.sleep(0.05)

        threads = [threading.Thread(target=submitter, args=(w,)) for w in range(4)]
        threads.append(threading.Thread(target=executor))
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        before = {a["id"]: a for a in every_action(admin)}
        time.sleep(0.3)  # keep the load on: the kill lands mid-request
        server.kill9()
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
    finally:
        server.stop()

    assert len(acknowledged) > 50, "the load never got going"
    server = start_server(db, period_s=0.1)
    try:
        client = SluiceClient(server.url)
        ticks = httpx.get(f"{server.url}/healthz").json()["ticks"]
        deadline = time.monotonic() + 10
        while httpx.get(f"{server.url}/healthz").json()["ticks"] < ticks + 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        after = {a["id"]: a for a in every_action(client)}

        # Nothing acknowledged is lost.
        assert acknowledged - set(after) == set()
        # Nothing is scheduled twice: a decision seen before the crash is the one kept.
        for action_id, seen in before.items():
            if seen["scheduled_at"]:
                now = after[action_id]
                assert now["state"] != "queued", action_id
                assert (now["scheduled_at"], now["placement"]) == (
                    seen["scheduled_at"],
                    seen["placement"],
                ), action_id
            if seen["state"] == "succeeded":
                assert after[action_id]["state"] == "succeeded"
        # No cap is exceeded.
        cpu, gpus = _charges(_live(client))
        assert cpu <= CPU_CAP * 1000 and gpus <= H100_CAP
        details = Queue.details("capped", client=client)
        assert details["accelerator_charges"].get("nvidia_gpu/nvidia-h100", 0) <= H100_CAP
    finally:
        server.stop()
