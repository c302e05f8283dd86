"""Annotated dependencies, so handler signatures stay short."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.auth import Authenticator, Principal
from api.store.records import Store
from api.ticker import TickLoop

_bearer = HTTPBearer(auto_error=False, description="A token from the server's auth file")


def get_store(request: Request) -> Store:
    return request.app.state.store


def get_ticker(request: Request) -> TickLoop:
    return request.app.state.ticker


def get_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    authenticator: Authenticator = request.app.state.auth
    header = f"{credentials.scheme} {credentials.credentials}" if credentials else None
    return authenticator.authenticate(header or request.headers.get("authorization"))


StoreDep = Annotated[Store, Depends(get_store)]
TickerDep = Annotated[TickLoop, Depends(get_ticker)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
