"""Requests are authenticated before their body is read, and bodies have a size limit."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.app import create_app
from api.config import ServiceSettings
from tests.support.service import service

TOKEN = "admin-token-0123456789"
LIMIT = 4096


def _app(tmp_path: Path, *, auth: bool = True) -> FastAPI:
    path = None
    if auth:
        path = tmp_path / "tokens.yaml"
        path.write_text(f"tokens:\n  {TOKEN}: {{role: admin}}\n")
        path.chmod(0o600)
    settings = ServiceSettings(database=tmp_path / "s.db", auth_file=path, max_body_bytes=LIMIT)
    return create_app(settings)


def _call(
    app: FastAPI, headers: dict[str, str], chunks: int, chunk: bytes = b"x" * 1000
) -> tuple[int, dict[str, Any], int]:
    """Drive the ASGI app directly: (status, JSON body, body messages the app read)."""
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": read < chunks}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/actions/batch",
        "raw_path": b"/actions/batch",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    asyncio.run(app(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body), read


def test_a_caller_without_a_token_is_refused_before_its_body_is_read(tmp_path: Path) -> None:
    """Issue: "No request size limit, and bodies are parsed before authentication: a 200 MB
    body with no token is read in full (RSS 197 → 560 MB) before the 401. Authenticate before
    reading the body" """
    app = _app(tmp_path)
    status, body, read = _call(app, {"content-length": str(200 * 2**20)}, chunks=200 * 1024)
    assert (status, body["code"], read) == (401, "UNAUTHENTICATED", 0)
    headers = {"content-length": "100", "authorization": "Bearer guessed-token-000000"}
    status, body, read = _call(app, headers, chunks=1)
    assert (status, body["code"], read) == (401, "UNAUTHENTICATED", 0)


def test_a_body_over_the_limit_is_413_from_its_length_or_as_it_streams(tmp_path: Path) -> None:
    """Issue: "reject bodies over a configurable limit (default 16 MiB) with 413." """
    app = _app(tmp_path)
    auth = {"authorization": f"Bearer {TOKEN}"}
    status, body, read = _call(app, {**auth, "content-length": str(200 * 2**20)}, 200 * 1024)
    assert (status, body["code"], body["field"], read) == (413, "REQUEST_TOO_LARGE", "body", 0)
    assert "4,096 bytes" in body["message"]
    # No Content-Length (a chunked body): refused once the bytes read pass the limit.
    status, body, read = _call(app, auth, chunks=200 * 1024)
    assert (status, body["code"], read) == (413, "REQUEST_TOO_LARGE", LIMIT // 1000 + 1)
    assert ServiceSettings().max_body_bytes == 16 * 2**20


def test_a_body_within_the_limit_is_served(tmp_path: Path) -> None:
    """Issue: "reject bodies over a configurable limit (default 16 MiB) with 413." """
    with TestClient(_app(tmp_path, auth=False)) as http:
        small = {"actions": [{"containers": [{"resources": {"cpu": "1"}}]}]}
        assert http.post("/actions/batch", json=small).status_code == 201
        big = {"actions": [{"containers": [{"resources": {"cpu": "1"}}]}] * 200}
        response = http.post("/actions/batch", json=big)
        assert (response.status_code, response.json()["code"]) == (413, "REQUEST_TOO_LARGE")
        response = http.post(
            "/actions/batch",
            content=iter([b"{" + b" " * LIMIT, b"}"]),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 413


def test_probes_and_docs_need_no_token(tmp_path: Path) -> None:
    """README: "`/healthz` needs no token." The API's documentation is open too, so a client
    can read it before it has a token."""
    with service(tmp_path) as svc:
        assert svc.http.get("/healthz").status_code == 200
    with TestClient(_app(tmp_path)) as http:
        for path in ("/healthz", "/openapi.json", "/docs"):
            assert http.get(path).status_code == 200, path
        assert http.get("/queues").status_code == 401
