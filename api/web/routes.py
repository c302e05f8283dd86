"""The dashboard's router: page shells, their assets, the API docs page, and the two reads
only the dashboard needs (who the token is; accelerators per node).

The shells and assets hold no data, so api.guard serves them without a token (everything
under `/ui/`, and `/`); the data comes from the API, fetched by the page with the token.
The dashboard adds no solve: its reads take what the last tick left (the queue views, the
watch streams) and the store. A blocked head's explanation comes with the queue's stream (the
tick computed it); an action's comes from `GET /actions/{id}/explanation`, which solves at
most once per action per tick, and the pages ask it once per new action state.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field

from api.auth import Role
from api.deps import PrincipalDep, StoreDep
from api.web.allocation import PoolAllocation, pool_allocations
from models.errors import NotFound

STATIC_PREFIX = "/ui/static"
_HERE = Path(str(files("api.web")))
_templates = Jinja2Templates(directory=_HERE / "templates")

# The API docs pages' files come from the fastapi-offline package (Swagger UI, Redoc and
# FastAPI's favicon, with their licenses in its metadata).
_DOCS_FILES = Path(str(files("fastapi_offline"))) / "static"
# Every file a page may load, by the name in its URL: a fixed list, so no path from a request
# ever reaches the file system.
ASSETS: dict[str, Path] = {
    **{path.name: path for path in (_HERE / "static").iterdir() if path.is_file()},
    **{f"api-docs/{path.name}": path for path in _DOCS_FILES.iterdir() if path.is_file()},
}

# Pages may load from this server only, so nothing on them reaches outside even where a
# bundled library would (Redoc's sidebar logo points at its CDN): the browser does not try.
PAGE_POLICY = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:"
# The docs pages start Swagger UI and Redoc from an inline script; Redoc runs a blob worker.
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; worker-src 'self' blob:;"
    " style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:"
)

router = APIRouter()
data_router = APIRouter(prefix="/dashboard", tags=["dashboard"])

# Every page's template (by its name) and title; the page's script reads its subject (a queue
# or an action) from the `data-subject` the shell carries.
PAGES = {
    "fleet": "Fleet",
    "queue": "Queue",
    "action": "Action",
    "clusters": "Clusters",
    "shares": "Quota shares",
}


def _page(request: Request, page: str, subject: str = "") -> HTMLResponse:
    return _templates.TemplateResponse(
        request,
        f"{page}.html",
        {"page": page, "title": PAGES[page], "subject": subject, "static": STATIC_PREFIX},
        headers={"Cache-Control": "no-store", "Content-Security-Policy": PAGE_POLICY},
    )


@router.get("/", include_in_schema=False)
def fleet_page(request: Request) -> HTMLResponse:
    return _page(request, "fleet")


@router.get("/ui/queues/{name}", include_in_schema=False)
def queue_page(request: Request, name: str) -> HTMLResponse:
    return _page(request, "queue", name)


@router.get("/ui/actions/{action_id}", include_in_schema=False)
def action_page(request: Request, action_id: str) -> HTMLResponse:
    return _page(request, "action", action_id)


@router.get("/ui/clusters", include_in_schema=False)
def clusters_page(request: Request) -> HTMLResponse:
    return _page(request, "clusters")


@router.get("/ui/shares", include_in_schema=False)
def shares_page(request: Request) -> HTMLResponse:
    return _page(request, "shares")


@router.get(STATIC_PREFIX + "/{name:path}", include_in_schema=False)
def asset(name: str) -> FileResponse:
    path = ASSETS.get(name)
    if path is None:
        raise NotFound(f"no dashboard asset {name!r}")
    return FileResponse(path, headers={"Cache-Control": "no-cache"})


_DOCS_ASSETS = f"{STATIC_PREFIX}/api-docs"


@router.get("/docs", include_in_schema=False)
def swagger_page() -> HTMLResponse:
    """FastAPI's Swagger UI page, its scripts served from here rather than a CDN."""
    return _local_only(
        get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Sluice API",
            oauth2_redirect_url="/docs/oauth2-redirect",
            swagger_js_url=f"{_DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{_DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{_DOCS_ASSETS}/favicon.png",
        )
    )


@router.get("/docs/oauth2-redirect", include_in_schema=False)
def swagger_oauth2_redirect() -> HTMLResponse:
    return _local_only(get_swagger_ui_oauth2_redirect_html())


@router.get("/redoc", include_in_schema=False)
def redoc_page() -> HTMLResponse:
    return _local_only(
        get_redoc_html(
            openapi_url="/openapi.json",
            title="Sluice API",
            redoc_js_url=f"{_DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{_DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )
    )


def _local_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = DOCS_POLICY
    return page


class Caller(BaseModel):
    """Who the token is, so the page shows admin controls to admins only."""

    name: str = Field(description="The token's name.")
    role: Role = Field(description="What the token may do.")
    queues: list[str] = Field(description="The queues a submitter's token may submit to.")


@data_router.get("/whoami")
def whoami(who: PrincipalDep) -> Caller:
    return Caller(name=who.name, role=who.role, queues=sorted(who.queues))


@data_router.get("/allocation")
async def allocation(store: StoreDep, _: PrincipalDep) -> list[PoolAllocation]:
    """Accelerators in use on every node of every pool, as the store holds them now."""
    snapshot = await asyncio.to_thread(store.read_snapshot, datetime.now(UTC))
    return pool_allocations(snapshot)
