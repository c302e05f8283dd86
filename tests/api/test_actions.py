"""Actions over HTTP: submit one or a batch, depth back-pressure, the whole life of an action,
executor reports, cancel, infeasible and expired actions, reusable environments."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.support.service import Service


def _action(action_id: str, queue: str | None = None, **container: object) -> dict:
    body: dict = {
        "id": action_id,
        "containers": [{"resources": {"cpu": "2", "memory": "4Gi"}, **container}],
    }
    if queue:
        body["queue"] = queue
    return body


def test_work_that_names_no_queue_goes_to_default(svc: Service) -> None:
    """Seed: "Anything you don't explicitly route goes to the default queue." """
    action = svc.ok("POST", "/actions", _action("loose"), status=201)
    assert (action["queue"], action["state"], action["run"]) == ("default", "queued", "loose")
    generated = svc.ok("POST", "/actions", {"containers": [{"resources": {"cpu": "1"}}]}, 201)
    assert generated["id"].startswith("act-")


def test_full_queue_rejects_at_once_with_resource_exhausted(svc: Service) -> None:
    """Seed: "When a queue is full, new submissions are rejected immediately with a
    RESOURCE_EXHAUSTED error rather than queueing forever." """
    svc.ok("POST", "/queues", {"name": "backfill", "depth": 3}, status=201)
    svc.ok("POST", "/actions/batch", {"actions": [_action("b1", "backfill")]}, status=201)
    batch = {"actions": [_action("b2", "backfill"), _action("b3", "backfill")]}
    svc.ok("POST", "/actions/batch", batch, status=201)
    status, body = svc.error("POST", "/actions", _action("b4", "backfill"))
    assert (status, body["code"], body["field"]) == (429, "RESOURCE_EXHAUSTED", "queue")
    assert "depth 3" in body["message"]
    # A finished action leaves the depth: in flight plus waiting is what counts.
    svc.ok("POST", "/actions/b1/cancel")
    svc.ok("POST", "/actions", _action("b4", "backfill"), status=201)


def test_concurrent_submissions_each_get_their_own_answer(svc: Service) -> None:
    """Seed: "When a queue is full, new submissions are rejected immediately with a
    RESOURCE_EXHAUSTED error rather than queueing forever." Submissions arriving together
    share commits; each is accepted or refused on its own: 30 at a queue of depth 10, among
    a batch and single actions to a queue that does not exist and a taken id."""
    svc.ok("POST", "/queues", {"name": "narrow", "depth": 10}, status=201)
    svc.ok("POST", "/actions", _action("taken"), status=201)
    bodies = [("/actions", _action(f"n{i}", "narrow")) for i in range(30)]
    bodies[5:5] = [("/actions", _action("lost", "nowhere")), ("/actions", _action("taken"))]
    bodies.append(("/actions/batch", {"actions": [_action("b1"), _action("b2")]}))

    async def post_all() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=svc.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            return await asyncio.gather(*(http.post(path, json=body) for path, body in bodies))

    answers = svc.http.portal.call(post_all)
    assert [(a.status_code, a.json()["code"]) for a in answers[5:7]] == [
        (404, "NOT_FOUND"),
        (409, "ALREADY_EXISTS"),
    ]
    assert (answers[-1].status_code, answers[-1].json()) == (201, {"ids": ["b1", "b2"]})
    narrow = [
        (a, body["id"])
        for a, (_, body) in zip(answers, bodies, strict=True)
        if body.get("queue") == "narrow"
    ]
    accepted = [sent for answer, sent in narrow if answer.status_code == 201]
    assert all(answer.json()["id"] == sent for answer, sent in narrow if answer.status_code == 201)
    refused = [answer.json()["code"] for answer, _ in narrow if answer.status_code != 201]
    assert (len(accepted), refused) == (10, ["RESOURCE_EXHAUSTED"] * 20)
    listed = svc.ok("GET", "/actions?queue=narrow")
    assert sorted(action["id"] for action in listed) == sorted(accepted)


def test_a_batch_is_all_or_none(svc: Service) -> None:
    svc.ok("POST", "/queues", {"name": "tight", "depth": 2}, status=201)
    batch = {"actions": [_action(f"t{i}", "tight") for i in range(3)]}
    status, body = svc.error("POST", "/actions/batch", batch)
    assert (status, body["code"]) == (429, "RESOURCE_EXHAUSTED")
    assert svc.ok("GET", "/queues/tight")["depth_used"] == 0
    batch = {"actions": [_action("x1"), _action("x1")]}
    status, body = svc.error("POST", "/actions/batch", batch)
    assert (status, body["code"]) == (409, "ALREADY_EXISTS")
    assert svc.error("GET", "/actions/x1")[0] == 404


def test_unknown_queue_and_bad_requests_have_their_own_codes(svc: Service) -> None:
    status, body = svc.error("POST", "/actions", _action("a", "nowhere"))
    assert (status, body["code"], body["field"]) == (404, "NOT_FOUND", "queue")
    batch = {"actions": [_action("ok"), _action("bad", resources={"cpu": "two"})]}
    status, body = svc.error("POST", "/actions/batch", batch)
    assert (status, body["code"]) == (400, "INVALID_ARGUMENT")
    assert body["field"] == "actions.1.containers.0.resources"
    assert "'two' is not a Kubernetes quantity" in body["message"]
    status, body = svc.error("POST", "/actions", {"id": "empty"})
    assert "needs containers or an environment" in body["message"]
    status, body = svc.error("POST", "/actions", _action("a", gpu="Z9"))
    assert body["field"] == "containers.0.gpu" and "unknown device" in body["message"]


def test_an_action_lives_from_queued_to_succeeded_and_frees_its_charges(svc: Service) -> None:
    """Seed: "A task that would push the queue past a cap waits until enough running work
    finishes." A finished action leaves the snapshot, so its charges are freed."""
    svc.ok("POST", "/queues", {"name": "q", "max_accelerators": {"H100": 8}}, status=201)
    svc.ok("POST", "/actions", _action("big", "q", gpu="H100:8"), status=201)
    svc.ok("POST", "/actions", _action("next", "q", gpu="H100:4"), status=201)
    svc.tick()
    big = svc.ok("GET", "/actions/big")
    assert big["state"] == "scheduled" and big["scheduled_at"]
    assert big["placement"] == {
        "cluster": "east",
        "containers": [{"name": "main", "node_pool": "h100", "node": 0}],
    }
    waiting = svc.ok("GET", "/actions/next")
    assert (waiting["state"], waiting["waiting_reason"]) == ("queued", "queue_cap")
    assert svc.ok("GET", "/queues/q")["accelerator_charges"]["nvidia_gpu/nvidia-h100"] == 8
    listed = svc.ok("GET", "/actions?state=scheduled&cluster=east")
    assert [a["id"] for a in listed] == ["big"]

    running = svc.ok("POST", "/actions/big/report", {"outcome": "started"})
    assert running["state"] == "running" and running["started_at"]
    svc.tick()
    assert svc.ok("GET", "/actions/next")["state"] == "queued"  # still charged
    done = svc.ok("POST", "/actions/big/report", {"outcome": "succeeded"})
    assert done["state"] == "succeeded" and done["finished_at"]
    svc.tick()
    assert svc.ok("GET", "/actions/next")["state"] == "scheduled"
    assert svc.ok("GET", "/queues/q")["accelerator_charges"]["nvidia_gpu/nvidia-h100"] == 4
    status, body = svc.error("POST", "/actions/big/report", {"outcome": "started"})
    assert (status, body["code"]) == (409, "FAILED_PRECONDITION")


def test_executor_failure_is_recorded_with_code_and_message(svc: Service) -> None:
    svc.ok("POST", "/actions", _action("oops"), status=201)
    svc.tick()
    failure = {"outcome": "failed", "code": "PREEMPTED", "message": "node lost"}
    failed = svc.ok("POST", "/actions/oops/report", failure)
    assert (failed["state"], failed["code"], failed["message"]) == (
        "failed",
        "PREEMPTED",
        "node lost",
    )


def test_cancel(svc: Service) -> None:
    svc.ok("POST", "/actions", _action("c1"), status=201)
    assert svc.ok("POST", "/actions/c1/cancel")["state"] == "cancelled"
    status, body = svc.error("POST", "/actions/c1/cancel")
    assert (status, body["code"]) == (409, "FAILED_PRECONDITION")
    svc.tick()
    assert svc.ok("GET", "/actions/c1")["state"] == "cancelled"
    assert svc.error("POST", "/actions/nope/cancel")[0] == 404


def test_infeasible_request_fails_fast_and_is_not_retried(svc: Service) -> None:
    """Seed: "Waiting would not help, so the action fails right away with the error code
    INFEASIBLE and is not retried. The error message names the request and the cap." """
    svc.ok("POST", "/queues", {"name": "capped", "max_resources": {"cpu": "32"}}, 201)
    svc.ok("POST", "/actions", _action("huge", "capped", resources={"cpu": "64"}), 201)
    svc.tick()
    huge = svc.ok("GET", "/actions/huge")
    assert (huge["state"], huge["code"]) == ("failed", "INFEASIBLE")
    assert "64" in huge["message"] and "32" in huge["message"]
    svc.tick()
    assert svc.ok("GET", "/actions/huge")["state"] == "failed"


def test_max_queued_time_fails_the_action_with_its_own_code(svc: Service) -> None:
    """Seed: "set max_queued_time to fail fast when capacity isn't available within your
    window" — and the caller gets MaxQueuedTimeExceededError."""
    svc.ok("POST", "/queues", {"name": "none", "max_resources": {"cpu": "2"}}, 201)
    svc.ok("POST", "/actions", _action("hog", "none"), status=201)
    body = _action("impatient", "none") | {"max_queued_time": "0.2s"}
    svc.ok("POST", "/actions", body, status=201)
    svc.tick()
    assert svc.ok("GET", "/actions/impatient")["state"] == "queued"
    time.sleep(0.3)
    svc.tick()
    failed = svc.ok("GET", "/actions/impatient")
    assert (failed["state"], failed["code"]) == ("failed", "MAX_QUEUED_TIME_EXCEEDED")


def test_reusable_environment_is_charged_once_when_it_starts(svc: Service) -> None:
    """Seed: "A queue counts those containers against its caps once, when the pool starts.
    ... Later actions that join the running pool add nothing to the cap." """
    svc.ok("POST", "/queues", {"name": "emb", "max_accelerators": {"H100": 2}}, 201)
    pool = {"queue": "emb", "replicas": 2, "resources": {"cpu": "4"}, "gpu": "H100:1"}
    svc.ok("PUT", "/environments/embedder", pool, status=201)
    for index in range(3):
        job = {"id": f"e{index}", "queue": "emb", "environment": "embedder"}
        svc.ok("POST", "/actions", job, status=201)
    svc.tick()
    environment = svc.ok("GET", "/environments/embedder")
    assert environment["running"] is True and environment["placement"]["cluster"] == "east"
    assert {svc.ok("GET", f"/actions/e{i}")["state"] for i in range(3)} == {"scheduled"}
    svc.tick()
    assert svc.ok("GET", "/queues/emb")["accelerator_charges"]["nvidia_gpu/nvidia-h100"] == 2
    _status, body = svc.error("POST", "/environments/embedder/stop")
    assert body["code"] == "FAILED_PRECONDITION"
    for index in range(3):
        svc.ok("POST", f"/actions/e{index}/report", {"outcome": "succeeded"})
    assert svc.ok("POST", "/environments/embedder/stop")["running"] is False
    _, body = svc.error("POST", "/actions", {"queue": "default", "environment": "embedder"})
    assert (body["code"], body["field"]) == ("INVALID_ARGUMENT", "queue")
