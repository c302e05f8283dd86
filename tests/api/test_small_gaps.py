"""The smaller gaps of issue 14 (part 7): bulk ids, Retry-After, a closed pipe, deletes of the
quota configuration, `sluice update settings`."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from api.client import JobQueue, SchedulingPolicy, ServiceEnvironment
from tests.support.quota_builders import G5
from tests.support.service import SLUICE, Server, Service


def _cli(svc: Service, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), obj=Remote(connection=svc.client()))
    return result.exit_code, result.stdout, result.stderr


def test_bulk_submit_without_an_id_makes_unique_ids(svc: Service) -> None:
    """Issue 14: "`sluice submit --count N` without `--id` makes ids `None-1 … None-N`, and a
    second bulk submit fails with ALREADY_EXISTS: generate unique ids." """
    code, first, err = _cli(svc, "submit", "--count", "3", "--resources", "cpu=1")
    assert code == 0, err
    code, second, err = _cli(svc, "submit", "--count", "3", "--resources", "cpu=1")
    assert code == 0, err
    ids = first.split() + second.split()
    assert len(set(ids)) == 6 and not any(one.startswith("None") for one in ids)
    code, named, err = _cli(svc, "submit", "--count", "2", "--id", "bulk", "--resources", "cpu=1")
    assert (code, named.split()) == (0, ["bulk-1", "bulk-2"]), err


def test_resource_exhausted_carries_retry_after(svc: Service) -> None:
    """Issue 14: "`429 RESOURCE_EXHAUSTED` carries no `Retry-After`." The seed: "That
    rejection is a back-pressure signal to your caller: catch it and slow down, rather than
    retrying in a tight loop." """
    svc.ok("POST", "/queues", {"name": "full", "depth": 1}, status=201)
    one = {"queue": "full", "containers": [{"resources": {"cpu": "1"}}]}
    svc.ok("POST", "/actions", one, status=201)
    response = svc.http.post("/actions", json=one)
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) >= 1
    assert "Retry-After" not in svc.http.get("/queues/nope").headers


@pytest.mark.slow
def test_watch_into_a_closed_pipe_exits_quietly(server: Server) -> None:
    """Issue 14: "`sluice get queue --watch | head` prints `INTERNAL: BrokenPipeError`." """
    done = subprocess.run(
        f"{SLUICE} --url {server.url} get queue --watch | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split()[:2] == ["NAME", "STATUS"]
    assert done.stderr == ""


POLICY = {"quota_share_policy": {"idle_resource_assignment_strategy": "FIFO"}}
QUEUE: dict[str, Any] = {
    "name": "training",
    "scheduling_policy": "quota-policy",
    "service_environment": "sagemaker-g5",
    "quota_shares": [{"name": "a", "capacity_limits": {G5: 1}, "strategy": "RESERVE"}],
}


def test_quota_configuration_is_deleted_only_when_unused(svc: Service) -> None:
    """Issue 14: "No delete for job queues, scheduling policies and service environments";
    the brief: refused with FAILED_PRECONDITION while in use."""
    client = svc.client()
    svc.ok("PUT", "/scheduling-policies/quota-policy", POLICY, status=201)
    svc.ok("PUT", "/service-environments/sagemaker-g5", {"capacity_limits": {G5: 3}}, status=201)
    svc.ok("POST", "/job-queues", QUEUE, status=201)
    for path in ("/scheduling-policies/quota-policy", "/service-environments/sagemaker-g5"):
        status, body = svc.error("DELETE", path)
        assert (status, body["code"]) == (409, "FAILED_PRECONDITION")
        assert "job queue training" in body["message"]
    job = {"id": "j1", "job_queue": "training", "share": "a", "instance_type": G5}
    svc.ok("POST", "/jobs", job, status=201)
    code, _, err = _cli(svc, "delete", "job-queue", "training")
    assert code == 1 and err.startswith("FAILED_PRECONDITION: job queue training still has 1")
    svc.ok("POST", "/jobs/j1/cancel")
    assert _cli(svc, "delete", "job-queue", "training")[:2] == (0, "job-queue training deleted\n")
    assert svc.ok("GET", "/jobs/j1")["state"] == "CANCELLED"  # its history stays
    assert _cli(svc, "delete", "scheduling-policy", "quota-policy")[0] == 0
    ServiceEnvironment.delete("sagemaker-g5", client=client)
    assert SchedulingPolicy.list(client=client) == ServiceEnvironment.list(client=client) == []
    assert JobQueue.list(client=client) == []
    status, body = svc.error("DELETE", "/job-queues/training")
    assert (status, body["code"]) == (404, "NOT_FOUND")


def test_update_settings(svc: Service) -> None:
    """Issue 14: "no `sluice update settings` (the org default GPU type is only settable by
    `apply`)." """
    code, out, err = _cli(svc, "update", "settings", "--default-gpu-type", "T4")
    assert code == 0, err
    assert svc.ok("GET", "/settings")["default_gpu_type"] == "nvidia_gpu/nvidia-t4"
    assert "nvidia-t4" in out
    assert _cli(svc, "update", "settings", "--clear-default-gpu-type")[0] == 0
    assert svc.ok("GET", "/settings")["default_gpu_type"] is None
    code, _, err = _cli(svc, "update", "settings")
    assert code == 1 and err.startswith("INVALID_ARGUMENT: give one of")
