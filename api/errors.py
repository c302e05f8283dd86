"""One error shape for every response: `{"code", "message", "field"?}`.

Sluice's own errors carry their code; request validation becomes
INVALID_ARGUMENT naming the field; an unmatched route or method gets a code of
its own; anything else is INTERNAL with a generic message (the traceback goes
to the server log, never to the caller).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
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


class ErrorBody(BaseModel):
    """Every error response's body."""

    code: ErrorCode = Field(
        description="The stable error code; clients branch on it, not on the message."
    )
    message: str = Field(description="What went wrong, in words, for people.")
    field: str | None = Field(
        default=None,
        description="The request field at fault, dotted (`actions.1.containers.0.resources`);"
        " null when no one field is.",
    )


_MEANING = {
    400: "INVALID_ARGUMENT: a value out of range or malformed, naming the field",
    401: "UNAUTHENTICATED: no token, or an unknown one",
    403: "PERMISSION_DENIED: the token's role or queues do not allow this",
    404: "NOT_FOUND: the resource, or one the body names, does not exist",
    409: "ALREADY_EXISTS, FAILED_PRECONDITION, QUEUE_DRAINING or PREEMPTED",
    413: "REQUEST_TOO_LARGE: the body is over the server's limit",
    429: "RESOURCE_EXHAUSTED: a queue is full, or too many streams are open",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route for the error statuses it returns beyond those every route
    may (see document_errors)."""
    return {status: {"model": ErrorBody, "description": _MEANING[status]} for status in statuses}


def document_errors(app: FastAPI, open_paths: frozenset[str]) -> None:
    """Make the OpenAPI document say what the server sends: one ErrorBody, and on every
    operation 401 (unless open), 400 (with parameters or a body) and 413 (with a body); no
    422, which FastAPI documents by default but this server never sends."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # cached by FastAPI; the changes below can be made again
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        error = {"$ref": "#/components/schemas/ErrorBody"}
        for path, operations in schema["paths"].items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                statuses = []
                if path not in open_paths:
                    statuses.append(401)
                if "requestBody" in operation or any(
                    _may_be_invalid(parameter) for parameter in operation.get("parameters", [])
                ):
                    statuses.append(400)
                if "requestBody" in operation:
                    statuses.append(413)
                for status in statuses:
                    responses.setdefault(
                        str(status),
                        {
                            "description": _MEANING[status],
                            "content": {"application/json": {"schema": error}},
                        },
                    )
        # ErrorBody itself is there: routes name it in their own error responses.
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _may_be_invalid(parameter: dict[str, Any]) -> bool:
    """Whether a value of this parameter can fail validation: any query parameter (a number
    out of range, a name outside an enum); a path segment only when it is not plain text."""
    if parameter.get("in") == "query":
        return True
    return parameter.get("schema", {}).get("type") != "string"


RETRY_AFTER_S = 1
"""What a 429 tells a caller to wait: room in a queue frees when a tick runs or an executor
reports, and a second is about one tick at the default period; a stream slot frees when a
watcher leaves. A caller that honours it backs off instead of retrying in a tight loop."""


def error_response(error: SluiceError) -> JSONResponse:
    headers = None
    if error.code is ErrorCode.UNAUTHENTICATED:
        headers = {"WWW-Authenticate": "Bearer"}
    elif error.code is ErrorCode.RESOURCE_EXHAUSTED:
        headers = {"Retry-After": str(RETRY_AFTER_S)}
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


def _allowed_methods(request: Request) -> str:
    """The methods the API document lists for this path (RFC 9110: a 405 carries `Allow`).
    Starlette's own 405 names only the first route that matched, and FastAPI makes one route
    per method. A path that matches several templates (`/actions/batch`, `/actions/{id}`)
    takes the most literal one, as a reader of the document would."""
    matches: list[tuple[int, set[str]]] = []
    for template, operations in request.app.openapi()["paths"].items():
        pattern = re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, request.url.path):
            matches.append((template.count("{"), {method.upper() for method in operations}))
    fewest = min((parameters for parameters, _ in matches), default=0)
    methods = set().union(*(found for parameters, found in matches if parameters == fewest))
    if "GET" in methods:
        methods.add("HEAD")  # Starlette answers HEAD wherever it answers GET
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SluiceError)
    async def _sluice(_: Request, error: SluiceError) -> JSONResponse:
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _request(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        malformed = next((p for p in problems if p["type"] == "json_invalid"), None)
        if malformed is not None:
            # Its location is a byte offset, which names no field: the body is at fault.
            reason = (malformed.get("ctx") or {}).get("error", "malformed")
            return error_response(InvalidInput(f"body: not valid JSON: {reason}", field="body"))
        # Locations start with where the value came from; "body" adds nothing for a caller.
        return error_response(invalid_from_validation(problems, skip=("body",)))

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
        body = {"code": code.value, "message": message}
        if error.status_code == 400:  # FastAPI's only one: a body it could not parse
            body.update(message=f"body: {message}", field="body")
        headers = error.headers
        if error.status_code == 405:
            headers = {**(headers or {}), "Allow": _allowed_methods(request)}
        return JSONResponse(body, status_code=error.status_code, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error serving %s %s", request.method, request.url.path)
        return JSONResponse(
            {"code": ErrorCode.INTERNAL.value, "message": "internal error; see the server log"},
            status_code=500,
        )
