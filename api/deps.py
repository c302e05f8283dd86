"""Annotated dependencies, so handler signatures stay short."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Path, Query, Request, Response, status
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from api.auth import Principal
from api.store.records import Listing, Order, Store
from api.submissions import GroupCommit
from api.ticker import TickLoop
from models.errors import InternalError, InvalidInput, NotFound
from models.fields import Timestamp

# Path parameters: one alias per resource, so every route that names one describes it alike.
_MADE_ID = "its submitter's, or the one the server made when none was given"
ActionId = Annotated[str, Path(description=f"The action's id: {_MADE_ID}.")]
JobId = Annotated[str, Path(description=f"The job's id: {_MADE_ID}.")]
QueueName = Annotated[str, Path(description="The queue's name.")]
ClusterName = Annotated[str, Path(description="The cluster's name.")]
EnvironmentName = Annotated[str, Path(description="The reusable environment's name.")]
TaskName = Annotated[str, Path(description="The task template's name.")]
TriggerName = Annotated[str, Path(description="The trigger's name.")]
JobQueueName = Annotated[str, Path(description="The job queue's name.")]
ShareName = Annotated[str, Path(description="The quota share's name, within its job queue.")]
PolicyName = Annotated[str, Path(description="The scheduling policy's name.")]
ServiceEnvironmentName = Annotated[str, Path(description="The service environment's name.")]

NEXT_PAGE_HEADER = "Next-Page-Token"
MAX_PAGE = 10_000

_bearer = HTTPBearer(auto_error=False, description="A token from the server's auth file")


# The dependencies below only read the request's state, so they are async: FastAPI runs a sync
# dependency in a worker thread, and three thread hops per request were a fifth of the
# server's CPU per submission (docs/benchmarks.md, the service under load).


async def get_store(request: Request) -> Store:
    return request.app.state.store


async def get_submissions(request: Request) -> GroupCommit:
    return request.app.state.submissions


async def get_ticker(request: Request) -> TickLoop:
    return request.app.state.ticker


async def get_principal(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who is calling, as api.guard authenticated them before the body was read.

    The bearer dependency only documents the scheme in the OpenAPI document."""
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        raise InternalError(f"{request.url.path} is served without authentication")
    return principal


def _query_names(route: APIRoute) -> set[str]:
    """The query parameters a route takes, its dependencies' included."""
    names: set[str] = set()
    dependants = [route.dependant]
    while dependants:
        dependant = dependants.pop()
        names.update(param.alias for param in dependant.query_params)
        dependants.extend(dependant.dependencies)
    return names


async def reject_unknown_query(request: Request) -> None:
    """Every route: a query parameter the route does not take is a 400, so a misspelt
    filter (or `offset`) is not silently ignored. An app-wide dependency; async, so it runs
    on the event loop instead of taking a worker thread."""
    route = request.scope.get("route")
    if not request.scope.get("query_string") or not isinstance(route, APIRoute):
        return  # most requests have no query: parsing none cost 5% of a submission's CPU
    known = _query_names(route)
    for name in request.query_params:
        if name not in known:
            takes = ", ".join(sorted(known)) or "none"
            raise InvalidInput(
                f"unknown query parameter {name!r}; {route.path} takes: {takes}",
                field=f"query.{name}",
            )


def _page_token(order: Order, after: int) -> str:
    """Opaque to clients: they send back what they got."""
    return base64.urlsafe_b64encode(f"1:{order.value}:{after}".encode()).decode().rstrip("=")


def _read_page_token(token: str) -> tuple[Order, int]:
    try:
        version, order, after = (
            base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().split(":")
        )
        if version != "1":
            raise ValueError(version)
        return Order(order), int(after)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput(
            "page_token is not one this server gave (send back Next-Page-Token unchanged)",
            field="query.page_token",
        ) from None


async def get_listing(
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="most items on a page")] = 100,
    order: Annotated[
        Order | None, Query(description="asc: oldest first (the default); desc: newest first")
    ] = None,
    page_token: Annotated[
        str | None, Query(description=f"the {NEXT_PAGE_HEADER} header of the previous page")
    ] = None,
    submitted_after: Annotated[Timestamp | None, Query(description="exclusive")] = None,
    submitted_before: Annotated[Timestamp | None, Query(description="exclusive")] = None,
) -> Listing:
    """The page of a listing a request asks for: keyset pagination on arrival order."""
    after = None
    if page_token is not None:
        token_order, after = _read_page_token(page_token)
        if order is not None and order is not token_order:
            raise InvalidInput(
                f"page_token continues an order={token_order.value} listing, not {order.value}",
                field="query.order",
            )
        order = token_order
    return Listing(
        limit=limit,
        order=order or Order.ASC,
        after=after,
        submitted_after=submitted_after,
        submitted_before=submitted_before,
    )


def paged(next_after: int | None, listing: Listing, response: Response) -> None:
    """Tell the caller where the next page starts (no header on the last page)."""
    if next_after is not None:
        response.headers[NEXT_PAGE_HEADER] = _page_token(listing.order, next_after)


def json_reply(body: BaseModel | Sequence[BaseModel], status_code: int = 200) -> Response:
    """`body` as the JSON FastAPI would send for it, dumped once here. For a route declared
    `def`, FastAPI re-validates a returned model in a worker thread before dumping it: a thread
    hop and about 250 us per response, for models the views have just built validated. The
    route names its model in `response_model=`, so the OpenAPI document stays the same."""
    if isinstance(body, BaseModel):
        content = body.model_dump_json()
    else:
        content = "[" + ",".join(model.model_dump_json() for model in body) + "]"
    return Response(content, status_code, media_type="application/json")


def created(response: Response, *segments: str) -> None:
    """A 201 whose Location is the new resource's path (segments URL-encoded)."""
    response.status_code = status.HTTP_201_CREATED
    response.headers["Location"] = "/" + "/".join(quote(segment, safe="") for segment in segments)


def exists(get: Callable[[str], object], name: str) -> bool:
    """Whether a PUT replaces (200) or creates (201)."""
    try:
        get(name)
    except NotFound:
        return False
    return True


CREATED_RESPONSE: dict[int | str, dict[str, Any]] = {
    201: {
        "description": "Created (it did not exist); the Location header is its path",
        "headers": {"Location": {"schema": {"type": "string"}}},
    }
}

NEXT_PAGE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            NEXT_PAGE_HEADER: {
                "description": "pass as page_token for the next page; absent on the last page",
                "schema": {"type": "string"},
            }
        }
    }
}

StoreDep = Annotated[Store, Depends(get_store)]
SubmissionsDep = Annotated[GroupCommit, Depends(get_submissions)]
TickerDep = Annotated[TickLoop, Depends(get_ticker)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
ListingDep = Annotated[Listing, Depends(get_listing)]
