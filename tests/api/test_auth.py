"""Bearer tokens with roles: admin, submitter (granted queues), executor, viewer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api.app import create_app
from api.config import ServiceSettings
from models.errors import InvalidInput
from tests.support.service import Service, service

TOKENS = """
tokens:
  adm-123:   {role: admin, name: platform}
  res-456:   {role: submitter, name: research-team, queues: [research]}
  exe-789:   {role: executor, name: gpu-runner}
  view-000:  {role: viewer}
"""


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    """This module's service asks for the tokens above (tests/api/conftest.py's does not)."""
    path = tmp_path / "tokens.yaml"
    path.write_text(TOKENS)
    with service(tmp_path, auth_file=path) as running:
        yield running


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_missing_or_unknown_token_is_401(svc: Service) -> None:
    response = svc.http.get("/queues")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["code"] == "UNAUTHENTICATED"
    assert "Authorization: Bearer <token>" in response.json()["message"]
    response = svc.http.get("/queues", headers=_headers("guess"))
    assert (response.status_code, response.json()["message"]) == (401, "unknown bearer token")
    assert svc.http.get("/healthz").status_code == 200  # probes need no token


def test_roles(svc: Service) -> None:
    """Issue: admin (queues, clusters, settings), submitter (submit and cancel on the queues
    it is granted), viewer; a submitter of one team cannot touch another team's queue."""
    http = svc.http
    admin, team, runner, viewer = (
        _headers(t) for t in ("adm-123", "res-456", "exe-789", "view-000")
    )
    for name in ("research", "inference-eval"):
        assert http.post("/queues", json={"name": name}, headers=admin).status_code == 201

    response = http.post("/queues", json={"name": "mine"}, headers=team)
    assert response.status_code == 403 and response.json()["code"] == "PERMISSION_DENIED"
    assert "needs an admin token" in response.json()["message"]
    assert http.get("/queues/research", headers=viewer).status_code == 200
    assert http.put("/settings", json={}, headers=viewer).status_code == 403

    job = {"id": "j1", "queue": "research", "containers": [{"resources": {"cpu": "1"}}]}
    assert http.post("/actions", json=job, headers=team).status_code == 201
    other = job | {"id": "j2", "queue": "inference-eval"}
    response = http.post("/actions", json=other, headers=team)
    assert response.status_code == 403
    assert response.json()["message"] == (
        "research-team (submitter) may not submit on queue inference-eval"
        " (granted queues: research)"
    )
    assert http.post("/actions", json=other, headers=admin).status_code == 201
    assert http.post("/actions/j2/cancel", headers=team).status_code == 403
    assert http.post("/actions", json=job | {"id": "j3"}, headers=viewer).status_code == 403

    svc.tick()
    report = {"outcome": "started"}
    assert http.post("/actions/j1/report", json=report, headers=team).status_code == 403
    assert http.post("/actions/j1/report", json=report, headers=runner).status_code == 200
    assert http.post("/actions/j1/cancel", headers=team).status_code == 200


def test_a_bad_auth_file_stops_the_server_from_starting(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tokens:\n  t1: {role: superuser}\n")
    with pytest.raises(InvalidInput, match=r"tokens\.t1\.role"):
        create_app(ServiceSettings(db_path=tmp_path / "x.db", auth_file=bad))
