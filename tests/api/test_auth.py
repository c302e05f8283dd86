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
  adm-123-0123456789:   {role: admin, name: platform}
  res-456-0123456789:   {role: submitter, name: research-team, queues: [research]}
  exe-789-0123456789:   {role: executor, name: gpu-runner}
  view-000-0123456789:  {role: viewer}
"""


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    """This module's service asks for the tokens above (tests/api/conftest.py's does not)."""
    with service(tmp_path, auth_file=_auth(tmp_path)) as running:
        yield running


def _auth(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(TOKENS)
    return path


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
        _headers(f"{t}-0123456789") for t in ("adm-123", "res-456", "exe-789", "view-000")
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


def _start(tmp_path: Path, text: str) -> InvalidInput:
    """The error a server refuses to start with, given an auth file of `text`."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(InvalidInput) as raised:
        create_app(ServiceSettings(database=tmp_path / "x.db", auth_file=path))
    return raised.value


SECRET = "s3cret-t0ken-abcdefgh"


def test_a_bad_auth_file_stops_the_server_from_starting(tmp_path: Path) -> None:
    """Issue: "A malformed auth file prints a token in its error message. Never print a
    token" """
    error = _start(tmp_path, f"tokens:\n  {SECRET}: {{role: superuser}}\n")
    assert "tokens.token #1.role" in error.message and SECRET not in error.message
    error = _start(tmp_path, f"tokens:\n  {SECRET}: {{role: admin, colour: red}}\n  x: [\n")
    assert "not valid YAML at line" in error.message and SECRET not in error.message


def test_auth_file_tokens_are_long_and_given_once(tmp_path: Path) -> None:
    """Issue: "check the file's permissions (warn if readable by others) and a minimum token
    length; duplicate keys are an error." """
    error = _start(tmp_path, "tokens:\n  short-token: {role: admin}\n")
    assert "token #1 has 11 characters; a token has at least 16" in error.message
    assert "short-token" not in error.message
    twice = f"tokens:\n  {SECRET}: {{role: admin}}\n  {SECRET}: {{role: viewer}}\n"
    error = _start(tmp_path, twice)
    assert "tokens: a token appears twice (token #2, line 3)" in error.message
    assert SECRET not in error.message
    error = _start(tmp_path, f"tokens:\n  {SECRET}: {{role: admin, role: viewer}}\n")
    assert "tokens.token #1: a key appears twice (role, line 2)" in error.message
    assert SECRET not in error.message


def test_an_auth_file_others_can_read_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue: "check the file's permissions (warn if readable by others)" """
    path = _auth(tmp_path)
    path.chmod(0o600)
    create_app(ServiceSettings(database=tmp_path / "x.db", auth_file=path))
    assert "readable by group or others" not in caplog.text
    path.chmod(0o644)
    create_app(ServiceSettings(database=tmp_path / "x.db", auth_file=path))
    assert f"auth file {path} is readable by group or others (mode 0o644)" in caplog.text
