"""The HTTP API's contract (issue 17): keyset pagination, unknown query parameters refused,
readable operation ids, Location on 201, 201 when PUT creates, media types declared."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from tests.support.service import Service

ONE_CPU = [{"resources": {"cpu": "1"}}]


def _submit(svc: Service, count: int, run: str | None = None, start: int = 0) -> None:
    actions = [
        {"id": f"a{index:03}", "containers": ONE_CPU, **({"run": run} if run else {})}
        for index in range(start, start + count)
    ]
    svc.ok("POST", "/actions/batch", {"actions": actions}, status=201)


def _all_pages(svc: Service, query: str) -> list[list[str]]:
    pages, token = [], None
    while True:
        url = f"/actions?{query}" + (f"&page_token={token}" if token else "")
        response = svc.http.get(url)
        assert response.status_code == 200, response.text
        pages.append([action["id"] for action in response.json()])
        token = response.headers.get("Next-Page-Token")
        if token is None:
            return pages


def test_actions_page_by_keyset_both_ways(svc: Service) -> None:
    """Issue 17: "with 15,000 actions the newest cannot be listed at all ... Add keyset
    pagination (`page_token` in, `next_page_token` out), `order=asc|desc`"."""
    _submit(svc, 7)
    ids = [f"a{index:03}" for index in range(7)]
    assert _all_pages(svc, "limit=3") == [ids[0:3], ids[3:6], ids[6:]]
    newest = ids[::-1]
    assert _all_pages(svc, "limit=3&order=desc") == [newest[0:3], newest[3:6], newest[6:]]
    # Rows added between pages do not shift the next page (no offset).
    first = svc.http.get("/actions?limit=3&order=desc")
    _submit(svc, 2, start=7)
    token = first.headers["Next-Page-Token"]
    after = svc.http.get(f"/actions?limit=3&page_token={token}").json()
    assert [action["id"] for action in after] == newest[3:6]
    # A page exactly at the end says there is no more.
    assert "Next-Page-Token" not in svc.http.get("/actions?limit=9").headers


def test_listing_filters_and_bad_tokens(svc: Service) -> None:
    """Issue 17: "filters by run and time"."""
    _submit(svc, 2, run="r1")
    middle = datetime.now(UTC).isoformat()
    _submit(svc, 2, start=2)
    assert [a["id"] for a in svc.ok("GET", "/actions?run=r1")] == ["a000", "a001"]
    assert [a["id"] for a in svc.ok("GET", "/actions?run=a003")] == ["a003"]  # its own run
    after = svc.http.get("/actions", params={"submitted_after": middle}).json()
    assert [a["id"] for a in after] == ["a002", "a003"]
    before = svc.http.get("/actions", params={"submitted_before": middle}).json()
    assert [a["id"] for a in before] == ["a000", "a001"]
    # Guide: "the OpenAPI document tells the truth": it says date-time, and a number is not
    # one (it was read as Unix seconds).
    for bad in ("0.5", "1700000000", "not-a-time", "9999-01-01T00:00:00Z"):
        status, body = svc.error("GET", f"/actions?submitted_before={bad}")
        assert (status, body["code"]) == (400, "INVALID_ARGUMENT"), (bad, body)
        assert "submitted_before" in body["message"], body
    status, body = svc.error("GET", "/actions?page_token=bm90LWEtdG9rZW4")
    assert (status, body["field"]) == (400, "query.page_token")
    token = svc.http.get("/actions?limit=1&order=desc").headers["Next-Page-Token"]
    status, body = svc.error("GET", f"/actions?page_token={token}&order=asc")
    assert (status, body["field"]) == (400, "query.order")
    assert svc.http.get("/jobs?limit=1&order=desc").status_code == 200


@pytest.mark.parametrize(
    "path", ["/actions?offset=10", "/jobs?sort=id", "/queues?pol=a", "/clusters?x=1", "/metrics?a"]
)
def test_unknown_query_parameters_are_refused(svc: Service, path: str) -> None:
    """Issue 17: "`offset`, `order` and other unknown parameters are silently ignored ...
    a 400 for unknown query parameters"."""
    status, body = svc.error("GET", path)
    name = path.split("?")[1].split("=")[0]
    assert (status, body["code"], body["field"]) == (400, "INVALID_ARGUMENT", f"query.{name}")
    assert "unknown query parameter" in body["message"]


def test_readable_operation_ids_and_media_types(svc: Service) -> None:
    """Issue 17: "Stable, readable operation ids (`createQueue`, not
    `create_queue_queues_post`)", "`text/event-stream` and Arrow media types declared"."""
    document = svc.ok("GET", "/openapi.json")
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    assert {"createQueue", "listActions", "submitBatch", "watchQueue"} <= set(ids)
    assert all(name.isalnum() and name[0].islower() for name in ids), ids
    paths = document["paths"]
    for path, event in (("/watch/queues", "queues"), ("/watch/queues/{name}", "queue")):
        stream = paths[path]["get"]["responses"]["200"]["content"]["text/event-stream"]
        # Guide: "the OpenAPI document tells the truth": a schema per event, as the stream is.
        schema = stream["schema"]
        assert set(schema["properties"]) == {"event", "id", "data"}
        assert schema["properties"]["event"]["enum"] == [event, "error"]
    snapshot = paths["/snapshot"]["get"]["responses"]["200"]["content"]
    assert "application/vnd.apache.arrow.stream" in snapshot
    listing = paths["/actions"]["get"]
    assert {"page_token", "order", "run", "submitted_after"} <= {
        p["name"] for p in listing["parameters"]
    }
    assert "Next-Page-Token" in listing["responses"]["200"]["headers"]


def test_location_on_201_and_201_when_put_creates(svc: Service) -> None:
    """Issue 17: "`Location` on 201, 201 when `PUT` creates"."""
    response = svc.http.post("/queues", json={"name": "research"})
    assert (response.status_code, response.headers["location"]) == (201, "/queues/research")
    response = svc.http.post("/actions", json={"id": "a-1.b", "containers": ONE_CPU})
    assert response.headers["location"] == "/actions/a-1.b"
    assert svc.http.get(response.headers["location"]).json()["id"] == "a-1.b"
    cluster = {"name": "spare"}
    response = svc.http.put("/clusters/spare", json=cluster)
    assert (response.status_code, response.headers["location"]) == (201, "/clusters/spare")
    response = svc.http.put("/clusters/spare", json=cluster)
    assert response.status_code == 200 and "location" not in response.headers
    pool = {"queue": "research", "resources": {"cpu": "1"}}
    assert svc.http.put("/environments/pool", json=pool).status_code == 201
    assert svc.http.put("/environments/pool", json=pool).status_code == 200
    assert svc.http.put("/scheduling-policies/p", json={}).status_code == 201
    assert svc.http.put("/scheduling-policies/p", json={}).status_code == 200


def test_one_delete_convention(svc: Service) -> None:
    """Issue 17: "one delete convention": every DELETE answers 204 without a body, a quota
    share's too (it answered 200 with its job queue)."""
    document = svc.ok("GET", "/openapi.json")
    deletes = {
        path: sorted(code for code in ops["delete"]["responses"] if code.startswith("2"))
        for path, ops in document["paths"].items()
        if "delete" in ops
    }
    assert len(deletes) >= 8 and set(map(tuple, deletes.values())) == {("204",)}, deletes
    svc.ok("PUT", "/scheduling-policies/p", {"quota_share_policy": {}}, status=201)
    svc.ok("PUT", "/service-environments/e", {"capacity_limits": {"ml.g5.xlarge": 2}}, status=201)
    shares = [{"name": n, "capacity_limits": {"ml.g5.xlarge": 1}, "strategy": "LEND"}
              for n in ("a", "b")]  # fmt: skip
    queue = {"name": "q", "scheduling_policy": "p", "service_environment": "e"}
    svc.ok("POST", "/job-queues", queue | {"quota_shares": shares}, status=201)
    response = svc.http.delete("/job-queues/q/shares/b")
    assert (response.status_code, response.content) == (204, b"")
    assert [s["name"] for s in svc.ok("GET", "/job-queues/q")["shares"]] == ["a"]


def test_the_readme_names_what_sluice_uses_for_each_concern() -> None:
    """Issue 17: "the README's ecosystem table says what Sluice uses for each concern and
    why": a row per concern the issue names, and every runtime dependency in it."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    table = readme.split("## Ecosystem", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    concerns = {row.split("|")[1].strip() for row in rows[1:]}
    assert {"metrics", "HTTP service", "Python client", "configuration", "tables"} <= concerns
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    names = [re.split(r"[<>=\[ ]", spec)[0] for spec in pyproject["project"]["dependencies"]]
    missing = [name for name in names if name.lower() not in table.lower()]
    assert not missing, missing


def test_the_readme_says_which_tools_open_which_format() -> None:
    """Issue 17: "the README says which tools open which format (DuckDB reads Parquet
    natively, Arrow IPC only with its extension)": the README points at the table, which
    says so."""
    root = Path(__file__).parents[2]
    readme = (root / "README.md").read_text()
    assert "docs/arrow/index.md#which-tools-open-which-format" in readme
    page = (root / "docs/arrow/index.md").read_text()
    table = page.split("## Which tools open which format", 1)[1].split("\n## ", 1)[0]
    (duckdb,) = [row for row in table.splitlines() if row.startswith("| DuckDB (SQL")]
    arrow_ipc, parquet = [cell.strip() for cell in duckdb.split("|")[2:4]]
    assert "extension" in arrow_ipc and parquet.startswith("natively")


def test_the_databases_side_files_are_ignored_by_git() -> None:
    """Issue 17: "`sluice.db-wal`/`-shm` in `.gitignore`" (SQLite's WAL mode keeps them
    beside `sluice.db` while it is open)."""
    patterns = (Path(__file__).parents[2] / ".gitignore").read_text().splitlines()
    for name in ("sluice.db", "sluice.db-wal", "sluice.db-shm"):
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


def test_cli_lists_newest_first_a_page_at_a_time(svc: Service, tmp_path: Path) -> None:
    """Issue 17: "`order=asc|desc` (newest first by default for the CLI)"; the brief: "The
    CLI's `get actions` gains `--page-token`/`--order`"."""
    _submit(svc, 3)
    runner = CliRunner()

    def get_actions(*options: str) -> tuple[list[str], str]:
        result = runner.invoke(
            main, ["get", "actions", "-o", "json", *options], obj=Remote(connection=svc.client())
        )
        assert result.exit_code == 0, result.output
        return [a["id"] for a in json.loads(result.stdout)], result.stderr

    ids, more = get_actions("--limit", "2")
    assert ids == ["a002", "a001"]
    token = more.split("--page-token ")[1].strip()
    assert get_actions("--page-token", token)[0] == ["a000"]
    assert get_actions("--order", "asc")[0] == ["a000", "a001", "a002"]
