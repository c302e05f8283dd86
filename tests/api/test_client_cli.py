"""The Python client and the CLI, letter for letter as the seed writes them, in-process."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from api.cli.render import QUEUE_COLUMNS
from api.client import Action, Queue, SluiceClient
from fixtures import FIXTURES
from models.errors import (
    MaxQueuedTimeExceededError,
    NotFound,
    QueueDraining,
    ResourceExhausted,
)
from tests.support.service import Service

FIXTURE = FIXTURES / "issue-example.yaml"


@pytest.mark.service(period_s=0.05)
def test_seed_python_api(svc: Service) -> None:
    """Every `Queue` call of the seed page, as written there."""
    client = svc.client()
    Queue.create(
        "research",
        run_concurrency=100,
        action_concurrency=1000,
        max_resources={"cpu": "512", "memory": "4Ti"},
        max_gpus=8,
        max_accelerators={"H100": 48},
        scheduling="greedy_capacity",
        client=client,
    )
    Queue.update("research", max_resources={"cpu": "768", "memory": "6Ti"}, client=client)
    Queue.update("research", max_gpus=16, client=client)
    Queue.update("research", max_accelerators={"H100": 64, "T4": 32}, client=client)
    metrics = Queue.details("research", client=client)
    assert metrics["max_resources"] == {"cpu": "768", "memory": "6Ti"}
    assert metrics["max_gpus"] == 16
    assert metrics["max_accelerators"] == {
        "nvidia_gpu/nvidia-h100": 64,
        "nvidia_gpu/nvidia-t4": 32,
    }
    Queue.update("research", max_resources={}, client=client)
    Queue.update("research", clear_max_gpus=True, client=client)
    Queue.update("research", max_accelerators={}, client=client)
    Queue.update("research", scheduling="strict_fifo", client=client)
    metrics = Queue.details("research", client=client)
    assert (metrics["max_resources"], metrics["max_gpus"], metrics["max_accelerators"]) == (
        {},
        None,
        {},
    )
    print(metrics["in_flight_resources"], metrics["max_resources"])
    print(metrics["accelerator_charges"], metrics["max_gpus"], metrics["max_accelerators"])
    print(metrics["scheduling"], metrics["head_blocked"])
    assert metrics["scheduling"] == "strict_fifo"

    for metrics in Queue.watch("research", limit=2, client=client):
        assert "in_flight_resources" in metrics
    Queue.update("research", pool="gpu-pool", client=client)
    snapshots = list(Queue.watch_pool(pools=["gpu-pool"], limit=2, client=client))
    assert len(snapshots) == 2
    for snapshot in snapshots:
        for metrics in snapshot:
            assert (metrics["pool"], metrics["name"]) == ("gpu-pool", "research")


def test_errors_become_their_own_exceptions(svc: Service) -> None:
    """Seed: "When max_queued_time fires, the parent task receives
    flyte.errors.MaxQueuedTimeExceededError." and a full queue is RESOURCE_EXHAUSTED."""
    client = svc.client()
    Queue.create("capped", depth=1, max_resources={"cpu": "1"}, client=client)
    Action.submit(queue="capped", id="hog", resources={"cpu": "1"}, client=client)
    with pytest.raises(ResourceExhausted, match="depth 1"):
        Action.submit(queue="capped", resources={"cpu": "1"}, client=client)
    with pytest.raises(NotFound):
        Queue.details("nope", client=client)
    Queue.drain("capped", client=client)
    with pytest.raises(QueueDraining):
        Action.submit(queue="capped", resources={"cpu": "1"}, client=client)
    Queue.drain("capped", undo=True, client=client)
    Queue.update("capped", depth=5, client=client)

    Action.submit(
        queue="capped", id="late", resources={"cpu": "1"}, max_queued_time="0.1s", client=client
    )
    svc.tick()
    assert Action.wait("hog", client=client)["state"] == "scheduled"
    time.sleep(0.2)
    svc.tick()
    with pytest.raises(MaxQueuedTimeExceededError):
        Action.wait("late", client=client)


def _cli(svc_client: SluiceClient, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), obj=Remote(connection=svc_client))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.service(period_s=0.05)
def test_seed_cli_lines(svc: Service) -> None:
    """Every `flyte ... queue` line of the seed, with `sluice` in place of `flyte`."""
    client = svc.client()
    lines = [
        "create queue research --run-concurrency 100 --action-concurrency 1000"
        " --max-resources cpu=512 --max-resources memory=4Ti --max-accelerators H100=48"
        " --scheduling greedy_capacity",
        "create queue inference-eval --run-concurrency 50 --action-concurrency 500"
        " --max-resources cpu=128 --max-accelerators H100=16 --scheduling greedy_capacity",
        "create queue mixed-gpu --run-concurrency 50 --action-concurrency 500 --max-gpus 8"
        " --max-accelerators H100=10",
        "update queue research --max-resources cpu=768 --max-resources memory=6Ti",
        "update queue research --max-gpus 16",
        "update queue research --max-accelerators H100=64 --max-accelerators T4=32",
        "update queue research --clear-max-resources",
        "update queue research --clear-max-gpus",
        "update queue research --clear-max-accelerators",
        "update queue research --scheduling strict_fifo",
        "get queue research",
        "update queue research --scheduling greedy_capacity",
    ]
    for line in lines:
        code, out, err = _cli(client, *line.split())
        assert code == 0, (line, err)
    code, out, _ = _cli(client, "get", "queue", "inference-eval")
    assert "nvidia_gpu/nvidia-h100" in out and "[" in out and "0 / 16" in out
    code, out, _ = _cli(client, "get", "queue", "research", "--watch", "--limit", "2")
    assert code == 0 and out.count("queue research") == 2
    code, out, _ = _cli(client, "get", "queue", "--watch", "--limit", "1")
    assert out.splitlines()[0].split()[:3] == ["NAME", "STATUS", "RUN"]
    _cli(client, "update", "queue", "research", "--pool", "gpu-pool")
    code, out, _ = _cli(client, "get", "queue", "--watch", "--pool", "gpu-pool", "--limit", "1")
    assert [line.split()[0] for line in out.strip().splitlines()[1:]] == ["research"]
    code, out, _ = _cli(client, "create", "queue", "multi", "--max-accelerators", "H100=48",
                        "--max-accelerators", "A100=16", "--max-accelerators", "T4=32",
                        "-o", "json")  # fmt: skip
    assert len(json.loads(out)["max_accelerators"]) == 3


def test_cli_blocked_banner_and_table_mark(svc: Service) -> None:
    """Seed: "`get queue <name> --watch` shows a head-of-line banner with the number of
    actions waiting behind it, and the `get queue --watch` table marks the queue as
    blocked." """
    client = svc.client()
    _cli(client, "create", "queue", "gang", "--max-gpus", "8", "--scheduling", "strict_fifo")
    for index, gpus in enumerate(["6", "4", "1", "1"]):
        code, _, err = _cli(client, "submit", "--queue", "gang", "--id", f"g{index}",
                            "--resources", "cpu=1", "--gpu", gpus)  # fmt: skip
        assert code == 0, err
        if index == 0:
            svc.tick()
    svc.tick(2)
    code, out, _ = _cli(client, "get", "queue", "gang")
    assert "HEAD OF LINE BLOCKED" in out and "g1 does not fit yet; 2 actions wait" in out
    assert "gpu (untyped)" in out and "6 / 8" in out
    code, out, _ = _cli(client, "get", "queue")
    row = next(line for line in out.splitlines() if line.startswith("gang"))
    assert "BLOCKED" in row and "(2 behind)" in row
    code, out, _ = _cli(client, "get", "action", "g1")
    assert "waiting:" in out


def test_queue_table_fits_80_columns_with_status_early(svc: Service) -> None:
    """Issue 17: "`sluice get queue --watch` wraps at 80 columns and pushes STATUS onto the
    next line: fit the table to the terminal (STATUS early, columns shrink)"."""
    client = svc.client()
    long_pool = "pool-of-the-research-department-gpus"
    for name in ("research-large-training-runs", "team-b"):
        code, _, err = _cli(client, "create", "queue", name, "--pool", long_pool, "--max-gpus",
                            "8", "--max-resources", "cpu=512", "--max-resources", "memory=4Ti",
                            "--scheduling",
                            "strict_fifo")  # fmt: skip
        assert code == 0, err
    for index, gpus in enumerate(["6", "4", "1"]):
        code, _, err = _cli(client, "submit", "--queue", "research-large-training-runs",
                            "--id", f"r{index}", "--resources", "cpu=1", "--gpu", gpus)  # fmt: skip
        assert code == 0, err
        svc.tick()
    runner = CliRunner(env={"COLUMNS": "80"})
    line = ["get", "queue", "--watch", "--pool", long_pool, "--limit", "1"]
    for args in (line, ["get", "queue"]):
        result = runner.invoke(main, args, obj=Remote(connection=client))
        assert result.exit_code == 0, result.stderr
        rows = [row for row in result.stdout.splitlines() if row.strip()]
        assert max(len(row) for row in rows) <= 80, result.stdout
        assert rows[0].split()[:2] == ["NAME", "STATUS"]
        assert set(rows[0].split()) <= set(QUEUE_COLUMNS)  # no header cut
        (blocked,) = [row for row in rows if row.startswith("research-large")]
        assert "BLOCKED" in blocked and "(1 behind)" in blocked, result.stdout
    # Into a pipe or a file, without COLUMNS: every character.
    remote = Remote(connection=client)
    piped = CliRunner(env={"COLUMNS": None}).invoke(main, ["get", "queue"], obj=remote)
    assert long_pool in piped.stdout and max(len(row) for row in piped.stdout.splitlines()) > 80


@pytest.mark.slow
def test_cli_errors_are_code_and_message_on_stderr(svc: Service) -> None:
    client = svc.client()
    code, out, err = _cli(client, "get", "queue", "nope")
    assert (code, out, err) == (1, "", "NOT_FOUND: queue 'nope' does not exist\n")
    code, _, err = _cli(client, "create", "queue", "x", "--max-resources", "cpu")
    assert code == 1 and err.startswith("INVALID_ARGUMENT: --max-resources: expected")
    code, _, err = _cli(client, "update", "queue", "default")
    assert code == 1 and "nothing to change" in err
    unreachable = SluiceClient("http://127.0.0.1:9")
    code, _, err = _cli(unreachable, "get", "queue")
    assert code == 1 and err.startswith("UNAVAILABLE: cannot reach the Sluice server")


def test_solve_prints_the_tick_result() -> None:
    """Issue 2: `sluice solve FILE --json` prints scheduled, failed, waiting, queues, solver."""
    runner = CliRunner()
    result = runner.invoke(main, ["solve", str(FIXTURE), "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"scheduled", "failed", "waiting", "queues", "solver"} <= set(data)
    assert data["scheduled"][0]["action"] == "eval-2"
    result = runner.invoke(main, ["solve", str(FIXTURE)])
    assert result.exit_code == 0 and "1 scheduled, 1 failed" in result.stdout
    result = runner.invoke(main, ["solve", "missing.yaml"])
    assert result.exit_code == 1 and result.stderr.startswith("INVALID_ARGUMENT: missing.yaml")


def test_every_command_has_help() -> None:
    runner = CliRunner()
    groups = {"create": ["queue"], "update": ["queue"], "get": ["queue", "action", "actions"]}
    for command in ["serve", "solve", "submit", "apply", *groups]:
        result = runner.invoke(main, [command, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.stdout
    for group, commands in groups.items():
        for command in commands:
            assert runner.invoke(main, [group, command, "--help"]).exit_code == 0


@pytest.mark.service(cluster=None)
def test_apply_puts_a_scenario_files_fleet(svc: Service) -> None:
    """`sluice apply` takes the scenario shape; runtime state in the file is left out."""
    client = svc.client()
    code, out, err = _cli(client, "apply", str(FIXTURE))
    assert code == 0, err
    assert out.splitlines() == [
        "settings put",
        "cluster east put",
        "queue research created",
        "environment embedder put",
    ]
    code, out, _ = _cli(client, "apply", str(FIXTURE))
    assert "queue research updated" in out
    assert Queue.details("research", client=client)["clusters"] == ["east"]
