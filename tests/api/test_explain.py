"""Explanations through the service and the command line.

Issue 5: "Python API, `sluice explain ACTION` against a server or a snapshot/scenario
file, and `GET /actions/{id}/explanation`; JSON and readable text." and "The queue view:
a strict_fifo queue with a blocked head shows the head's explanation."
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from api.client import SluiceClient
from fixtures import SEEDS
from tests.support.service import Service

SEEDS = SEEDS


def _cli(client: SluiceClient | None, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), obj=Remote(connection=client))
    return result.exit_code, result.stdout, result.stderr


def _submit(client: SluiceClient, action: str, *options: str) -> None:
    code, _, err = _cli(client, "submit", "--id", action, *options)
    assert code == 0, err


def test_service_explains_waiting_failed_and_scheduled_actions(svc: Service) -> None:
    """The seed's 8-GPU example on a strict line: "Under strict FIFO the queue stays at 6 of
    8 until 2 more GPUs free up." """
    client = svc.client()
    _cli(client, "create", "queue", "gang", "--max-gpus", "8", "--scheduling", "strict_fifo")
    _submit(client, "g0", "--queue", "gang", "--resources", "cpu=1", "--gpu", "6")
    svc.tick()
    for action, gpus in (("g1", "4"), ("g2", "1"), ("too-big", "9")):
        _submit(client, action, "--queue", "gang", "--resources", "cpu=1", "--gpu", gpus)
    svc.tick()

    head = svc.ok("GET", "/actions/g1/explanation")
    assert (head["state"], head["code"]) == ("waiting", "queue_cap")
    assert [(i["kind"], i["message"]) for i in head["items"]] == [
        ("untyped_gpu_cap", "queue gang, untyped GPUs: 6 of 8 in use, needs 4")
    ]
    assert [c["kind"] for s in head["suggestions"] for c in s["changes"]] == [
        "raise_cap",
        "wait_for_finish",
    ]
    behind = svc.ok("GET", "/actions/g2/explanation")
    assert behind["items"][0]["kind"] == "head_of_line"
    assert behind["items"][0]["head"] == "g1"

    failed = svc.ok("GET", "/actions/too-big/explanation")
    assert (failed["state"], failed["code"]) == ("failed", "INFEASIBLE")
    # 9 GPUs are more than the cap and more than one 8-GPU node: one smaller request
    # settles both, a larger cap settles only one.
    assert [i["kind"] for i in failed["items"]] == ["untyped_gpu_cap", "larger_than_node"]
    # Issue 18: "after the change, the action is not INFEASIBLE and the tick runs it or says
    # why it now waits".
    assert failed["suggestions"][0]["message"] == (
        "reduce the GPU count of container main from 9 to 8 (a node of pool h100): then it"
        " can run; the tick re-run with it keeps it waiting for now: behind g1 at the head of"
        " strict_fifo queue gang"
    )
    placed = svc.ok("GET", "/actions/g0/explanation")
    assert placed["state"] == "scheduled" and placed["cluster"] == "east"

    queue = svc.ok("GET", "/queues/gang")
    assert queue["head_blocked"] and queue["head_explanation"]["action"] == "g1"

    code, out, _ = _cli(client, "explain", "g2")
    assert code == 0 and "[head_of_line] behind g1 at the head of strict_fifo queue gang" in out
    code, out, _ = _cli(client, "get", "queue", "gang")
    assert "why g1 waits: queue gang, untyped GPUs: 6 of 8 in use, needs 4" in out


def test_service_explains_nothing_for_finished_or_unknown_actions(svc: Service) -> None:
    client = svc.client()
    _submit(client, "done", "--resources", "cpu=1")
    _cli(client, "cancel", "action", "done")
    status, body = svc.error("GET", "/actions/done/explanation")
    assert (status, body["code"]) == (409, "FAILED_PRECONDITION")
    status, body = svc.error("GET", "/actions/nope/explanation")
    assert (status, body["code"]) == (404, "NOT_FOUND")


def test_cli_explains_a_scenario_file_as_text_and_json() -> None:
    fixture = str(SEEDS / "eight-gpu-strict.yaml")
    code, out, err = _cli(None, "explain", "evaluate", "--file", fixture)
    assert code == 0, err
    assert out.splitlines() == [
        "evaluate (team): waiting, blocked_behind_head",
        "why:",
        "  - [head_of_line] behind train at the head of strict_fifo queue team, blocked since"
        " 10:00, 2 waiting behind it (train itself waits: queue team, untyped gpus: 6 of 8 in"
        " use, needs 4)",
        "what would change it:",
        "  1. switch queue team to greedy_capacity: then it runs",
    ]
    code, out, _ = _cli(None, "explain", "train", "--file", fixture, "--json")
    data = json.loads(out)
    assert data["items"][0]["kind"] == "untyped_gpu_cap"
    assert data["items"][0]["used"] == 6 and data["items"][0]["limit"] == 8
    code, _, err = _cli(None, "explain", "nope", "--file", fixture)
    assert (code, err) == (1, "NOT_FOUND: no action 'nope' in the snapshot\n")
