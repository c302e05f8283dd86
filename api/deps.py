"""Annotated dependencies, so handler signatures stay short."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.auth import Principal
from api.store.records import Store
from api.ticker import TickLoop
from models.errors import InternalError

_bearer = HTTPBearer(auto_error=False, description="A token from the server's auth file")


def get_store(request: Request) -> Store:
    return request.app.state.store


def get_ticker(request: Request) -> TickLoop:
    return request.app.state.ticker


def get_principal(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who is calling, as api.guard authenticated them before the body was read.

    The bearer dependency only documents the scheme in the OpenAPI document."""
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        raise InternalError(f"{request.url.path} is served without authentication")
    return principal


StoreDep = Annotated[Store, Depends(get_store)]
TickerDep = Annotated[TickLoop, Depends(get_ticker)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
