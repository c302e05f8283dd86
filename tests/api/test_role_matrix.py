"""Every route against every kind of caller: admin, a submitter of the queue at hand, a
submitter of another queue, executor, viewer, a bad token and none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fixtures.service_fleets import EAST_SMALL
from tests.support.quota_builders import G5
from tests.support.service import Service, service

TOKENS = {
    "admin": "admin-token-0123456789",
    "own submitter": "research-token-0123456789",
    "other submitter": "inference-token-0123456789",
    "executor": "executor-token-0123456789",
    "viewer": "viewer-token-0123456789",
    "bad token": "nobody-knows-this-token",
}
AUTH = f"""
tokens:
  {TOKENS["admin"]}: {{role: admin}}
  {TOKENS["own submitter"]}: {{role: submitter, name: research, queues: [research]}}
  {TOKENS["other submitter"]}: {{role: submitter, name: inference, queues: [inference-eval]}}
  {TOKENS["executor"]}: {{role: executor}}
  {TOKENS["viewer"]}: {{role: viewer}}
"""
# Those refused most often first, so that a change an allowed caller makes comes last.
CALLERS = [
    "no token",
    "bad token",
    "viewer",
    "executor",
    "other submitter",
    "own submitter",
    "admin",
]
ANY = {"admin", "own submitter", "other submitter", "executor", "viewer"}
RULES = {
    "open": {*ANY, "no token", "bad token"},
    "any": ANY,
    "admin": {"admin"},
    "executor": {"admin", "executor"},
    "queue": {"admin", "own submitter"},  # rights on queue (or job queue) research
}
CONTAINERS = [{"resources": {"cpu": "1", "memory": "1Gi"}}]
SHARE = {"capacity_limits": {G5: 1}, "strategy": "LEND"}
JOB_QUEUE = {
    "name": "research",
    "scheduling_policy": "policy",
    "service_environment": "sagemaker",
    "quota_shares": [{"name": "s", **SHARE}],
}
JOB = {"job_queue": "research", "share": "s", "instance_type": G5}
TASK = {"queue": "research", "containers": CONTAINERS}
TRIGGER = {"every": "1h", "queue": "research", "actions": [{"containers": CONTAINERS}]}
# (method, route path, request path, body, rule); destructive ones last.
MATRIX: list[tuple[str, str, str, Any, str]] = [
    ("GET", "/healthz", "/healthz", None, "open"),
    ("GET", "/readyz", "/readyz", None, "open"),
    ("GET", "/metrics", "/metrics", None, "any"),
    ("GET", "/snapshot", "/snapshot", None, "any"),
    ("GET", "/dashboard/whoami", "/dashboard/whoami", None, "any"),
    ("GET", "/dashboard/allocation", "/dashboard/allocation", None, "any"),
    ("GET", "/settings", "/settings", None, "any"),
    ("PUT", "/settings", "/settings", {}, "admin"),
    ("POST", "/queues", "/queues", {"name": "new"}, "admin"),
    ("GET", "/queues", "/queues", None, "any"),
    ("GET", "/queues/{name}", "/queues/research", None, "any"),
    ("PATCH", "/queues/{name}", "/queues/research", {"priority": 1}, "admin"),
    ("POST", "/queues/{name}/drain", "/queues/spare/drain", None, "admin"),
    ("POST", "/queues/{name}/undrain", "/queues/spare/undrain", None, "admin"),
    ("GET", "/clusters", "/clusters", None, "any"),
    ("GET", "/clusters/{name}", "/clusters/east", None, "any"),
    ("PUT", "/clusters/{name}", "/clusters/east", EAST_SMALL, "admin"),
    ("POST", "/actions", "/actions", {"queue": "research", "containers": CONTAINERS}, "queue"),
    (
        "POST",
        "/actions/batch",
        "/actions/batch",
        {"actions": [{"queue": "research", "containers": CONTAINERS}]},
        "queue",
    ),
    ("GET", "/actions", "/actions", None, "any"),
    ("GET", "/actions/{action_id}", "/actions/mine", None, "any"),
    ("GET", "/actions/{action_id}/explanation", "/actions/mine/explanation", None, "any"),
    (
        "POST",
        "/actions/{action_id}/report",
        "/actions/mine/report",
        {"outcome": "started"},
        "executor",
    ),
    ("POST", "/actions/move", "/actions/move", {"ids": ["mine"], "to": "research"}, "queue"),
    (  # a move needs rights on both queues: only an admin has them
        "POST",
        "/queues/{name}/move",
        "/queues/research/move",
        {"to": "inference-eval", "where": "gpu>=8"},
        "admin",
    ),
    ("POST", "/actions/{action_id}/cancel", "/actions/mine/cancel", None, "queue"),
    ("GET", "/environments", "/environments", None, "any"),
    ("GET", "/environments/{name}", "/environments/pool", None, "any"),
    (
        "PUT",
        "/environments/{name}",
        "/environments/pool",
        {"queue": "research", "resources": {"cpu": "1"}},
        "queue",
    ),
    (  # a move needs rights on both queues: only an admin has them
        "PUT",
        "/environments/{name}",
        "/environments/pool",
        {"queue": "inference-eval", "resources": {"cpu": "1"}},
        "admin",
    ),
    ("POST", "/environments/{name}/stop", "/environments/pool/stop", None, "executor"),
    ("GET", "/watch/queues", "/watch/queues?limit=1", None, "any"),
    ("GET", "/watch/queues/{name}", "/watch/queues/research?limit=1", None, "any"),
    ("PUT", "/scheduling-policies/{name}", "/scheduling-policies/other", {}, "admin"),
    ("GET", "/scheduling-policies", "/scheduling-policies", None, "any"),
    ("GET", "/scheduling-policies/{name}", "/scheduling-policies/policy", None, "any"),
    (
        "PUT",
        "/service-environments/{name}",
        "/service-environments/other",
        {"capacity_limits": {G5: 1}},
        "admin",
    ),
    ("GET", "/service-environments", "/service-environments", None, "any"),
    ("GET", "/service-environments/{name}", "/service-environments/sagemaker", None, "any"),
    (
        "POST",
        "/job-queues",
        "/job-queues",
        {**JOB_QUEUE, "name": "new", "service_environment": "other", "scheduling_policy": "policy"},
        "admin",
    ),
    ("GET", "/job-queues", "/job-queues", None, "any"),
    ("GET", "/job-queues/{name}", "/job-queues/research", None, "any"),
    ("PATCH", "/job-queues/{name}", "/job-queues/research", {"state": "ENABLED"}, "admin"),
    ("PUT", "/job-queues/{name}/shares/{share}", "/job-queues/research/shares/t", SHARE, "admin"),
    (
        "PATCH",
        "/job-queues/{name}/shares/{share}",
        "/job-queues/research/shares/t",
        {"in_share_preemption": True},
        "admin",
    ),
    ("DELETE", "/job-queues/{name}/shares/{share}", "/job-queues/research/shares/t", None, "admin"),
    ("POST", "/jobs", "/jobs", JOB, "queue"),
    ("GET", "/jobs", "/jobs", None, "any"),
    ("GET", "/jobs/{job_id}", "/jobs/job", None, "any"),
    ("POST", "/jobs/{job_id}/report", "/jobs/job/report", {"outcome": "started"}, "executor"),
    ("POST", "/jobs/{job_id}/cancel", "/jobs/job/cancel", None, "queue"),
    ("POST", "/triggers", "/triggers", {**TRIGGER, "name": "new"}, "queue"),
    ("GET", "/triggers", "/triggers", None, "any"),
    ("GET", "/triggers/{name}", "/triggers/nightly", None, "any"),
    ("PATCH", "/triggers/{name}", "/triggers/nightly", {"every": "2h"}, "queue"),
    (  # a move needs rights on both queues: only an admin has them
        "PATCH",
        "/triggers/{name}",
        "/triggers/new",
        {"queue": "inference-eval"},
        "admin",
    ),
    ("POST", "/triggers/{name}/pause", "/triggers/nightly/pause", None, "queue"),
    ("POST", "/triggers/{name}/resume", "/triggers/nightly/resume", None, "queue"),
    ("POST", "/tasks", "/tasks", {**TASK, "name": "new"}, "queue"),
    ("GET", "/tasks", "/tasks", None, "any"),
    ("GET", "/tasks/{name}", "/tasks/train", None, "any"),
    ("DELETE", "/triggers/{name}", "/triggers/nightly", None, "queue"),
    ("DELETE", "/tasks/{name}", "/tasks/train", None, "queue"),
    ("DELETE", "/job-queues/{name}", "/job-queues/new", None, "admin"),
    ("DELETE", "/scheduling-policies/{name}", "/scheduling-policies/other", None, "admin"),
    ("DELETE", "/service-environments/{name}", "/service-environments/other", None, "admin"),
    ("DELETE", "/queues/{name}", "/queues/spare", None, "admin"),
    ("DELETE", "/clusters/{name}", "/clusters/spare", None, "admin"),
]


def _headers(caller: str) -> dict[str, str]:
    return {} if caller == "no token" else {"Authorization": f"Bearer {TOKENS[caller]}"}


def _seed(svc: Service) -> None:
    admin = _headers("admin")

    def ok(method: str, path: str, body: Any) -> None:
        response = svc.http.request(method, path, json=body, headers=admin)
        assert response.is_success, response.text

    for name in ("research", "inference-eval", "spare"):
        ok("POST", "/queues", {"name": name})
    ok("PUT", "/clusters/spare", {"name": "spare"})
    ok("POST", "/actions", {"id": "mine", "queue": "research", "containers": CONTAINERS})
    ok("PUT", "/environments/pool", {"queue": "research", "resources": {"cpu": "1"}})
    ok("PUT", "/scheduling-policies/policy", {"quota_share_policy": {}})
    ok("PUT", "/service-environments/sagemaker", {"capacity_limits": {G5: 2}})
    ok("POST", "/job-queues", JOB_QUEUE)
    ok("POST", "/jobs", {**JOB, "id": "job"})
    ok("POST", "/triggers", {**TRIGGER, "name": "nightly"})
    ok("POST", "/tasks", {**TASK, "name": "train"})
    svc.tick()


def test_every_route_checks_the_role_of_every_caller(tmp_path: Path) -> None:
    """Issue: "Audit every route for the same pattern (rights checked on the target, not on
    what exists) and test the full role matrix (admin, submitter per queue, executor, viewer,
    bad token, none) route by route." Each status seen is one the OpenAPI document lists for
    the operation (issue: "the real statuses (400, 401, 403, 404, 409, 413, 429) documented
    per operation")."""
    auth = tmp_path / "tokens.yaml"
    auth.write_text(AUTH)
    with service(tmp_path, auth_file=auth, cluster=EAST_SMALL) as svc:
        routes = {
            (method.upper(), path)
            for path, operations in svc.app.openapi()["paths"].items()
            for method in operations
        }
        assert routes == {(method, path) for method, path, *_ in MATRIX}
        documented = svc.app.openapi()["paths"]
        _seed(svc)
        wrong = []
        for method, route, path, body, rule in MATRIX:
            for caller in CALLERS:
                response = svc.http.request(method, path, json=body, headers=_headers(caller))
                if str(response.status_code) not in documented[route][method.lower()]["responses"]:
                    wrong.append((method, path, caller, response.status_code, "undocumented"))
                if caller in RULES[rule]:
                    expected_ok = response.status_code not in (401, 403)
                elif caller in ("no token", "bad token"):
                    expected_ok = response.status_code == 401
                else:
                    expected_ok = response.status_code == 403
                if not expected_ok or response.status_code >= 500:
                    wrong.append((method, path, caller, response.status_code, response.text))
        assert not wrong, "\n".join(map(str, wrong))


def test_changing_an_environment_needs_rights_on_its_queue_and_on_the_new_one(
    tmp_path: Path,
) -> None:
    """Issue: "`PUT /environments/{name}` checks only the queue named in the new body: the
    inference-eval submitter moved research's environment into its own queue and resized it;
    research's next submission to it was refused. Changing an environment needs rights on
    its current queue and on the new one." """
    auth = tmp_path / "tokens.yaml"
    auth.write_text(AUTH)
    with service(tmp_path, auth_file=auth) as svc:
        _seed(svc)
        http = svc.http
        taken = {"queue": "inference-eval", "replicas": 4, "resources": {"cpu": "8"}}
        response = http.put("/environments/pool", json=taken, headers=_headers("other submitter"))
        assert (response.status_code, response.json()["code"]) == (403, "PERMISSION_DENIED")
        assert (
            "may not change environment pool, which is on queue research"
            in (response.json()["message"])
        )
        resized = {"queue": "research", "replicas": 4, "resources": {"cpu": "8"}}
        response = http.put("/environments/pool", json=resized, headers=_headers("other submitter"))
        assert response.status_code == 403
        response = http.put("/environments/pool", json=taken, headers=_headers("own submitter"))
        assert response.status_code == 403  # research may not push it into inference-eval
        pool = http.get("/environments/pool", headers=_headers("viewer")).json()
        assert (pool["queue"], pool["replicas"]) == ("research", 1)
        job = {"queue": "research", "environment": "pool"}
        response = http.post("/actions", json=job, headers=_headers("own submitter"))
        assert response.status_code == 201, response.text
        response = http.put("/environments/pool", json=resized, headers=_headers("own submitter"))
        assert response.status_code == 200, response.text
        # Moving between two queues needs both: an admin may.
        response = http.put("/environments/fresh", json=taken, headers=_headers("other submitter"))
        assert response.status_code == 201, response.text
