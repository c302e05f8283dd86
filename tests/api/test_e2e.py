"""End to end: a real `sluice serve` on a loopback port, driven by the `sluice` command and
the Python client, moving the seed's 8-GPU example under both policies."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml

from api.client import Action, Queue, SluiceClient
from fixtures.service_fleets import EAST_SMALL
from tests.support.metrics import value
from tests.support.service import Server, sluice

SEED_CREATE = (
    "create queue research --run-concurrency 100 --action-concurrency 1000"
    " --max-resources cpu=512 --max-resources memory=4Ti --max-gpus 8 --max-accelerators H100=48"
    " --scheduling greedy_capacity"
)


def _until(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Round:
    """One run of the seed's example: 6 of 8 GPUs in use, then train (4), evaluate, embed."""

    def __init__(self, client: SluiceClient, name: str) -> None:
        self.client, self.name = client, name
        self.old = [f"{name}-old{i}" for i in range(3)]
        for action_id in self.old:
            self._submit(action_id, 2)
        _until(lambda: self.states(*self.old) == {"scheduled"}, "6 of 8 GPUs in use")
        for action_id, gpus in (("train", 4), ("evaluate", 1), ("embed", 1)):
            self._submit(f"{name}-{action_id}", gpus)

    def _submit(self, action_id: str, gpus: int) -> None:
        Action.submit(
            queue="research", id=action_id, resources={"cpu": "1"}, gpu=gpus, client=self.client
        )

    def states(self, *ids: str) -> set[str]:
        return {Action.get(i, client=self.client)["state"] for i in ids}

    def state(self, short: str) -> str:
        return Action.get(f"{self.name}-{short}", client=self.client)["state"]

    def gpus_in_use(self) -> int:
        return Queue.details("research", client=self.client)["accelerator_charges"].get("gpu", 0)

    def finish(self, action_id: str) -> None:
        Action.report(action_id, "succeeded", client=self.client)

    def finish_all(self) -> None:
        for action in Action.list(queue="research", state="scheduled", client=self.client):
            self.finish(action["id"])
        _until(lambda: self.gpus_in_use() == 0, "an idle queue")


@pytest.mark.slow
def test_seed_example_moves_as_the_seed_says(tmp_path: Path, server: Server) -> None:
    """Seed: "A queue is capped at 8 GPUs and 6 are in use, so 2 are free. ... Under greedy
    capacity the queue runs at 8 of 8 GPUs, and train starts once 4 GPUs are free at the same
    moment. Under strict FIFO the queue stays at 6 of 8 until 2 more GPUs free up. Then train
    starts, followed by evaluate and embed." """
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"clusters": [EAST_SMALL]}))
    url = server.url
    assert "cluster east put" in sluice(url, "apply", str(fleet)).stdout
    assert "queue research" in sluice(url, *SEED_CREATE.split()).stdout
    client = SluiceClient(url)

    # Greedy capacity: evaluate and embed take the 2 free GPUs; train waits for 4.
    greedy = Round(client, "g")
    _until(lambda: greedy.states("g-evaluate", "g-embed") == {"scheduled"}, "8 of 8")
    assert (greedy.gpus_in_use(), greedy.state("train")) == (8, "queued")
    greedy.finish("g-old0")
    time.sleep(0.3)  # a few ticks: 2 free GPUs are not 4
    assert greedy.state("train") == "queued"
    greedy.finish("g-old1")
    _until(lambda: greedy.state("train") == "scheduled", "train once 4 are free")
    greedy.finish_all()

    # Strict FIFO: stays at 6 of 8 with a blocked head; then train, then the others.
    sluice(url, "update", "queue", "research", "--scheduling", "strict_fifo")
    strict = Round(client, "s")
    _until(lambda: Queue.details("research", client=client)["head_blocked"], "a blocked head")
    assert (strict.gpus_in_use(), strict.states("s-train", "s-evaluate", "s-embed")) == (
        6,
        {"queued"},
    )
    detail = sluice(url, "get", "queue", "research").stdout
    assert "HEAD OF LINE BLOCKED" in detail and "2 actions wait behind it" in detail
    sluice(url, "update", "queue", "research", "--pool", "gpu-pool")
    table = sluice(url, "get", "queue", "--watch", "--pool", "gpu-pool", "--limit", "1").stdout
    assert "BLOCKED" in next(line for line in table.splitlines() if line.startswith("research"))
    strict.finish("s-old0")
    _until(lambda: strict.state("train") == "scheduled", "train first")
    assert strict.states("s-evaluate", "s-embed") == {"queued"} and strict.gpus_in_use() == 8
    strict.finish("s-old1")
    _until(lambda: strict.states("s-evaluate", "s-embed") == {"scheduled"}, "the others")
    strict.finish_all()

    # "To let the waiting actions that fit run now, switch the policy."
    switch = Round(client, "w")
    _until(lambda: Queue.details("research", client=client)["head_blocked"], "blocked again")
    sluice(url, "update", "queue", "research", "--scheduling", "greedy_capacity")
    _until(lambda: switch.states("w-evaluate", "w-embed") == {"scheduled"}, "fits run now")
    assert switch.state("train") == "queued"

    frames = sluice(url, "get", "queue", "research", "--watch", "--limit", "2").stdout
    assert frames.count("queue research") == 2
    metrics = json.loads(sluice(url, "get", "queue", "research", "-o", "json").stdout)
    assert metrics["accelerator_charges"]["gpu"] == 8 and metrics["max_gpus"] == 8
    scrape = httpx.get(f"{url}/metrics").text
    research = {"queue": "research", "pool": "gpu-pool", "device": "gpu"}
    assert value(scrape, "sluice_queue_in_flight_devices", **research) == 8
