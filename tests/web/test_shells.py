"""The dashboard's server side: shells and assets open, data behind the token, the
accelerators per node, and API docs pages that load nothing from outside."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.web.routes import ASSETS
from tests.support.service import Service, service

ADMIN = "web-admin-token-0123456789"
VIEWER = "web-viewer-token-0123456789"
SHELLS = ("/", "/ui/queues/research", "/ui/actions/act-1", "/ui/clusters", "/ui/shares")


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    auth = tmp_path / "auth.yaml"
    auth.write_text(
        f"tokens:\n  {ADMIN}: {{role: admin, name: platform}}\n  {VIEWER}: {{role: viewer}}\n"
    )
    auth.chmod(0o600)
    with service(tmp_path, auth_file=auth) as running:
        yield running


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_shells_and_assets_need_no_token_and_hold_no_data(svc: Service) -> None:
    """Issue: "the HTML shell and static assets must be served without a token (they contain
    no data), data comes from the API with the token." """
    for path in SHELLS:
        response = svc.http.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("text/html")
        # Nothing in a shell depends on who asks: an admin gets the same bytes as anyone.
        assert svc.http.get(path, headers=_bearer(ADMIN)).content == response.content, path
    for name in ASSETS:
        assert svc.http.get(f"/ui/static/{name}").status_code == 200, name
    assert svc.http.get("/ui/static/../auth.yaml").status_code == 404
    for path in ("/dashboard/whoami", "/dashboard/allocation", "/queues", "/watch/queues"):
        assert svc.http.get(path).status_code == 401, path


def test_a_path_under_the_open_prefix_never_reaches_an_api_route(svc: Service) -> None:
    """A dot segment is not resolved by the router: `/ui/../queues` is no route, so the open
    prefix cannot be used to read data without a token."""
    assert svc.http.get("/ui/%2E%2E/queues").status_code == 404
    assert svc.http.get("/ui/queues").status_code == 404


def test_a_shell_escapes_the_name_in_its_url(svc: Service) -> None:
    page = svc.http.get("/ui/queues/%3Cimg%20src=x%20onerror=alert(1)%3E").text
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_whoami_names_the_role(svc: Service) -> None:
    """Issue: "no action buttons for a viewer": the page asks who the token is."""
    viewer = svc.http.get("/dashboard/whoami", headers=_bearer(VIEWER)).json()
    admin = svc.http.get("/dashboard/whoami", headers=_bearer(ADMIN)).json()
    assert (viewer["role"], admin["role"], admin["name"]) == ("viewer", "admin", "platform")


def test_allocation_counts_the_accelerators_on_each_node(svc: Service) -> None:
    """Issue: "Clusters: node pools with allocation per node (a heat map of GPUs used per
    node)" """
    headers = _bearer(ADMIN)
    gang = {
        "id": "gang-1",
        "containers": [
            {"name": f"worker-{i}", "resources": {"cpu": "8", "memory": "64Gi"}, "gpu": "H100:6"}
            for i in range(2)
        ],
    }
    assert svc.http.post("/actions", json=gang, headers=headers).status_code == 201
    svc.tick()
    pools = svc.http.get("/dashboard/allocation", headers=headers).json()
    h100 = next(pool for pool in pools if pool["node_pool"] == "h100")
    assert (h100["cluster"], h100["accelerators_per_node"], h100["max_nodes"]) == ("east", 8, 2)
    assert [node["accelerators_used"] for node in h100["per_node"]] == [6, 6]
    assert all(node["actions"] == ["gang-1"] for node in h100["per_node"])
    cpu = next(pool for pool in pools if pool["node_pool"] == "cpu")
    assert {node["accelerators_used"] for node in cpu["per_node"]} == {0}


def test_api_docs_pages_load_only_local_files(svc: Service) -> None:
    """Issue: "Self-contained: every asset served by Sluice itself (no CDN), including the API
    docs page" """
    for path in ("/docs", "/redoc"):
        page = svc.http.get(path)
        assert page.status_code == 200, path
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert assets, path
        assert all(asset.startswith("/ui/static/") for asset in assets), (path, assets)
        assert "https://" not in page.text, path
