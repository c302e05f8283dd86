"""Schemathesis against a real `sluice serve`: every operation, with an admin token and with
none, checked against the OpenAPI document the server publishes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from api.app import create_app
from api.config import ServiceSettings
from fixtures.service_fleets import EAST_SMALL
from tests.support.service import Server, start_server

ADMIN = "fuzz-admin-token-0123456789"
AUTH = f"tokens:\n  {ADMIN}: {{role: admin, name: fuzz}}\n"
OPEN = {"/healthz", "/readyz", "/openapi.json"}
TIMEOUT_S = 10.0


# The document as the server builds it; the fixture checks the served one is the same. It is
# needed at collection, to make one test per operation, before any server runs.
DOCUMENT = create_app(ServiceSettings()).openapi()
schema = schemathesis.openapi.from_dict(DOCUMENT)
# Extra parameters are not generated: an unknown query parameter is a 400 (D67, tested on its
# own in tests/api/test_contract.py) and unknown headers are ignored, as HTTP servers
# do; the document promises nothing about either.
schema.config.generation.update(allow_extra_parameters=False)
FUZZ = settings(
    derandomize=True,  # a fixed seed: the same requests on every run
    deadline=None,
    database=None,
    # Shrinking replays requests against a server whose state has moved on: the first
    # failing example is reported as it was sent.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with a token file, a cluster and a queue, so that some of the generated
    requests reach something that exists."""
    root = tmp_path_factory.mktemp("fuzz")
    auth = root / "auth.yaml"
    auth.write_text(AUTH)
    auth.chmod(0o600)
    running = start_server(root / "sluice.db", period_s=0.5, extra=["--auth", str(auth)])
    admin = {"Authorization": f"Bearer {ADMIN}"}
    try:
        for method, path, body in [
            ("PUT", "/clusters/east", EAST_SMALL),
            ("POST", "/queues", {"name": "research", "max_resources": {"cpu": 64}}),
        ]:
            response = httpx.request(method, running.url + path, json=body, headers=admin)
            assert response.is_success, response.text
        assert httpx.get(f"{running.url}/openapi.json").json() == DOCUMENT
        yield running
    finally:
        running.stop()


def _bounded(case: Any) -> None:
    """A watch stream would run until the server stops, or its limit: one event is enough
    (a limit that is not a positive integer stays, to be refused)."""
    if case.path.startswith("/watch"):
        limit = (case.query or {}).get("limit", 1)
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 1:
            limit = 1
        case.query = {**(case.query or {}), "limit": limit}


def _excluded(case: Any) -> list[Any]:
    """The checks that do not apply to this case.

    positive_data_acceptance never does: the server bounds values beyond what JSON Schema
    says (known resource and device names, quantities within models/limits.py, rules across
    fields), so a schema-valid body may rightly get its documented 400 (D80 in
    docs/decisions.md). negative_data_rejection does not apply to a list of strings in the
    query: whatever schemathesis negates it into (a number, an object) is sent as text,
    which is a valid one-item list on the wire."""
    excluded = [positive_data_acceptance]
    if any(
        parameter.location == "query" and parameter.definition["schema"].get("type") == "array"
        for parameter in case.operation.iter_parameters()
    ):
        excluded.append(negative_data_rejection)
    return excluded


@pytest.mark.slow
@schema.parametrize()
@settings(FUZZ, max_examples=20)
def test_as_an_admin_no_500_and_every_response_as_documented(case: Any, fuzzed: Server) -> None:
    """Issue: "Add a bounded schemathesis run ... against a real `sluice serve` on loopback,
    with an admin token and without one ... every operation, all checks that apply, a fixed
    seed, a few minutes at most. 0 responses with status 500 and 0 responses that do not
    match the documented schema." """
    _bounded(case)
    case.call_and_validate(
        base_url=fuzzed.url,
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=TIMEOUT_S,
        excluded_checks=_excluded(case),
    )


@pytest.mark.slow
@schema.parametrize()
@settings(FUZZ, max_examples=5)
def test_without_a_token_every_operation_is_401(case: Any, fuzzed: Server) -> None:
    """Issue: "... with an admin token and without one": without one, every operation but the
    open probes answers 401 with the documented ErrorBody."""
    _bounded(case)
    response = case.call_and_validate(
        base_url=fuzzed.url, timeout=TIMEOUT_S, excluded_checks=_excluded(case)
    )
    if case.path not in OPEN:
        assert response.status_code == 401, response.text
        assert response.json()["code"] == "UNAUTHENTICATED"
