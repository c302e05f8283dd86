"""One error shape for every response: `{"code", "message", "field"?}`.

Sluice's own errors carry their code; request validation becomes
INVALID_ARGUMENT naming the field; an unmatched route or method gets a code of
its own; anything else is INTERNAL with a generic message (the traceback goes
to the server log, never to the caller).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from models.errors import HTTP_STATUS, ErrorCode, InvalidInput, SluiceError

log = logging.getLogger("sluice.api")

_HTTP_CODES: dict[int, ErrorCode] = {
    400: ErrorCode.INVALID_ARGUMENT,
    401: ErrorCode.UNAUTHENTICATED,
    403: ErrorCode.PERMISSION_DENIED,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.INVALID_ARGUMENT,
    409: ErrorCode.FAILED_PRECONDITION,
    422: ErrorCode.INVALID_ARGUMENT,
    429: ErrorCode.RESOURCE_EXHAUSTED,
    503: ErrorCode.UNAVAILABLE,
}


def error_response(error: SluiceError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.code is ErrorCode.UNAUTHENTICATED else None
    return JSONResponse(error.to_dict(), status_code=HTTP_STATUS[error.code], headers=headers)


def invalid_from_validation(problems: Sequence[Any], skip: tuple[str, ...] = ()) -> InvalidInput:
    """One InvalidInput for pydantic's list of problems, naming the first field."""
    lines, fields = [], []
    for problem in problems:
        loc = [str(part) for part in problem["loc"] if part not in skip]
        message = str(problem["msg"]).removeprefix("Value error, ")
        # A Sluice error raised in a validator may name a field of its own, below the
        # location (`borrow_limit` of a share, `capacity_limits.NUM_INSTANCES`): use it.
        own = getattr((problem.get("ctx") or {}).get("error"), "field", None)
        if own and message.startswith(f"{own}:"):
            message = message[len(own) + 1 :].strip()
            loc = [*(loc[:-1] if loc and loc[-1] == own.split(".")[0] else loc), own]
        where = ".".join(loc)
        # Sluice's own messages already start with the field (`max_resources.cpu: ...`).
        if loc and message.startswith(f"{loc[-1]}:"):
            message = message[len(loc[-1]) + 1 :].strip()
        if where and not message.startswith((f"{where}:", f"{where}.")):
            message = f"{where}: {message}"
        fields.append(where)
        lines.append(message)
    return InvalidInput("; ".join(lines), field=fields[0] if fields and fields[0] else None)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SluiceError)
    async def _sluice(_: Request, error: SluiceError) -> JSONResponse:
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _request(_: Request, error: RequestValidationError) -> JSONResponse:
        # Locations start with where the value came from; "body" adds nothing for a caller.
        return error_response(invalid_from_validation(error.errors(), skip=("body",)))

    @app.exception_handler(ValidationError)
    async def _model(_: Request, error: ValidationError) -> JSONResponse:
        return error_response(invalid_from_validation(error.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(error.status_code, ErrorCode.INTERNAL)
        message = str(error.detail)
        if error.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path} (see /docs)"
        elif error.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path} (see /docs)"
        return JSONResponse({"code": code.value, "message": message}, status_code=error.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error serving %s %s", request.method, request.url.path)
        return JSONResponse(
            {"code": ErrorCode.INTERNAL.value, "message": "internal error; see the server log"},
            status_code=500,
        )
