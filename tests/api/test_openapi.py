"""The OpenAPI document tells the truth about errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.guard import OPEN_PATHS
from tests.support.service import service

ERROR = {"$ref": "#/components/schemas/ErrorBody"}


def _document(tmp_path: Path) -> dict[str, Any]:
    with service(tmp_path) as svc:
        return svc.ok("GET", "/openapi.json")


def test_one_error_body_and_the_statuses_each_operation_returns(tmp_path: Path) -> None:
    """Issue: "For that the OpenAPI document must tell the truth: one `ErrorBody {code,
    message, field}` schema; the real statuses (400, 401, 403, 404, 409, 413, 429) documented
    per operation; no 422 that the server never sends" """
    document = _document(tmp_path)
    schemas = document["components"]["schemas"]
    assert set(schemas["ErrorBody"]["properties"]) == {"code", "message", "field"}
    assert schemas["ErrorBody"]["required"] == ["code", "message"]
    assert not {"HTTPValidationError", "ValidationError"} & set(schemas)
    assert '"422"' not in str(document).replace("'", '"')
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            where = f"{method.upper()} {path}"
            errors = {int(status) for status in responses if int(status) >= 400}
            assert errors <= {400, 401, 403, 404, 409, 413, 429, 503}, where
            for status in errors - {503}:  # the probes' 503 carries their own body
                content = responses[str(status)]["content"]["application/json"]
                assert content["schema"] == ERROR, (where, status)
            assert (401 in errors) == (path not in OPEN_PATHS), where
            if "requestBody" in operation:
                assert {400, 413} <= errors, where
    paths = document["paths"]
    assert {"403", "404", "409", "429"} <= set(paths["/actions"]["post"]["responses"])
    assert "403" in paths["/environments/{name}"]["put"]["responses"]
    assert "429" in paths["/watch/queues"]["get"]["responses"]
    assert "400" not in paths["/queues/{name}"]["get"]["responses"]  # a name is any text


def test_a_body_that_is_not_json_names_body(tmp_path: Path) -> None:
    """Issue: "JSON decode errors name `body`, not a byte offset." """
    with service(tmp_path) as svc:
        response = svc.http.post(
            "/actions", content=b'{"containers": [', headers={"content-type": "application/json"}
        )
        body = response.json()
        assert (response.status_code, body["code"], body["field"]) == (
            400,
            "INVALID_ARGUMENT",
            "body",
        )
        assert body["message"].startswith("body: not valid JSON")
        deep = b'{"containers": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        response = svc.http.post(
            "/actions", content=deep, headers={"content-type": "application/json"}
        )
        assert (response.status_code, response.json()["field"]) == (400, "body")


def test_a_list_in_the_query_is_documented_as_a_list(tmp_path: Path) -> None:
    """Issue: "For that the OpenAPI document must tell the truth": a query string has no null,
    so `pool` is a list of names (empty: every pool), not "a list or null" (found by the
    schemathesis run, tests/api/test_fuzz_schema.py)."""
    document = _document(tmp_path)
    for path in ("/queues", "/watch/queues"):
        (pool,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == "pool"]
        assert pool["schema"]["type"] == "array" and "anyOf" not in pool["schema"], path
    (tmp_path / "again").mkdir()
    with service(tmp_path / "again") as svc:
        svc.ok("POST", "/queues", {"name": "a", "pool": "p"}, status=201)
        svc.ok("POST", "/queues", {"name": "b", "pool": "q"}, status=201)
        assert {"a", "b"} <= {q["name"] for q in svc.ok("GET", "/queues")}
        assert [q["name"] for q in svc.ok("GET", "/queues?pool=q")] == ["b"]
        stream = svc.http.get("/watch/queues?pool=p&limit=1").text
        assert '"name":"a"' in stream.replace(" ", "") and '"b"' not in stream


def test_a_node_shape_is_documented_as_it_is_given(tmp_path: Path) -> None:
    """Issue: "For that the OpenAPI document must tell the truth": a node's quantities are
    given as spellings or integers, and its resources may be null (none); the document said
    integers only and a map only (found by the schemathesis run)."""
    document = _document(tmp_path)
    shape = document["components"]["schemas"]["NodeShape-Input"]["properties"]
    quantity = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert {k: v for k, v in shape["cpu"].items() if k in ("anyOf", "type")} == quantity
    assert shape["resources"]["anyOf"][1] == {"type": "null"}
    assert shape["resources"]["anyOf"][0]["additionalProperties"] == quantity
    (tmp_path / "again").mkdir()
    with service(tmp_path / "again") as svc:
        pool = {"name": "p", "node": {"cpu": "8", "memory": 2**30, "resources": None}, "nodes": 1}
        svc.ok("PUT", "/clusters/x", {"name": "x", "node_pools": [pool]}, status=201)


def _undescribed(node: Any, where: str) -> list[str]:
    """Every property under `node` (at any depth) without a description."""
    if isinstance(node, list):
        return [m for i, item in enumerate(node) for m in _undescribed(item, f"{where}.{i}")]
    if not isinstance(node, dict):
        return []
    found = [
        f"{where}.{name}"
        for name, schema in node.get("properties", {}).items()
        if not schema.get("description")
    ]
    return found + [m for key, value in node.items() for m in _undescribed(value, f"{where}.{key}")]


def test_every_field_of_every_schema_is_described(tmp_path: Path) -> None:
    """Issue 17: "descriptions on schema fields". Every property of every request and
    response body (and of what they hold), and every query and path parameter, says what it
    means, so the document alone is enough to write a client."""
    document = _document(tmp_path)
    assert _undescribed(document, "") == []
    assert _undescribed({"properties": {"x": {"type": "string"}}}, "probe") == ["probe.x"]
    parameters = [
        f"{method.upper()} {path} {parameter['name']}"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for parameter in operation.get("parameters", [])
        if not parameter.get("description")
    ]
    assert parameters == []
