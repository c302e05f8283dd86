"""The one family of Sluice errors, each with a stable code.

The API maps a code to an HTTP status, the client maps it back to the same
class, and the CLI prints `code: message`; no other exception is meant to reach
a user.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    QUEUE_DRAINING = "QUEUE_DRAINING"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    INFEASIBLE = "INFEASIBLE"
    MAX_QUEUED_TIME_EXCEEDED = "MAX_QUEUED_TIME_EXCEEDED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    PREEMPTED = "PREEMPTED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.ALREADY_EXISTS: 409,
    ErrorCode.FAILED_PRECONDITION: 409,
    ErrorCode.QUEUE_DRAINING: 409,
    ErrorCode.RESOURCE_EXHAUSTED: 429,
    ErrorCode.REQUEST_TOO_LARGE: 413,
    ErrorCode.INFEASIBLE: 422,
    ErrorCode.MAX_QUEUED_TIME_EXCEEDED: 408,
    ErrorCode.DEADLINE_EXCEEDED: 408,
    ErrorCode.PREEMPTED: 409,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
}


class SluiceError(Exception):
    """Base of every error Sluice reports; `code` is stable, `message` is for people."""

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    def to_dict(self) -> dict[str, str]:
        body = {"code": self.code.value, "message": self.message}
        if self.field:
            body["field"] = self.field
        return body


class InvalidInput(SluiceError, ValueError):
    """Bad input; a ValueError too, so pydantic reports it with the field's location."""

    code = ErrorCode.INVALID_ARGUMENT


class NotFound(SluiceError):
    code = ErrorCode.NOT_FOUND


class AlreadyExists(SluiceError):
    code = ErrorCode.ALREADY_EXISTS


class FailedPrecondition(SluiceError):
    code = ErrorCode.FAILED_PRECONDITION


class QueueDraining(SluiceError):
    code = ErrorCode.QUEUE_DRAINING


class ResourceExhausted(SluiceError):
    code = ErrorCode.RESOURCE_EXHAUSTED


class RequestTooLarge(SluiceError):
    """A request body over the server's limit (api.config.ServiceSettings.max_body_bytes)."""

    code = ErrorCode.REQUEST_TOO_LARGE


class Infeasible(SluiceError):
    code = ErrorCode.INFEASIBLE


class MaxQueuedTimeExceededError(SluiceError):
    code = ErrorCode.MAX_QUEUED_TIME_EXCEEDED


class DeadlineExceeded(SluiceError):
    code = ErrorCode.DEADLINE_EXCEEDED


class Preempted(SluiceError):
    code = ErrorCode.PREEMPTED


class Unauthenticated(SluiceError):
    code = ErrorCode.UNAUTHENTICATED


class PermissionDenied(SluiceError):
    code = ErrorCode.PERMISSION_DENIED


class Unavailable(SluiceError):
    code = ErrorCode.UNAVAILABLE


class InternalError(SluiceError):
    code = ErrorCode.INTERNAL


ERROR_CLASSES: dict[ErrorCode, type[SluiceError]] = {
    cls.code: cls
    for cls in (
        InvalidInput,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        QueueDraining,
        ResourceExhausted,
        RequestTooLarge,
        Infeasible,
        MaxQueuedTimeExceededError,
        DeadlineExceeded,
        Preempted,
        Unauthenticated,
        PermissionDenied,
        Unavailable,
        InternalError,
    )
}


def error_from_code(code: str, message: str, field: str | None = None) -> SluiceError:
    """The exception class for a code received over the wire (unknown codes map to INTERNAL)."""
    try:
        cls = ERROR_CLASSES[ErrorCode(code)]
    except ValueError:
        cls = InternalError
    return cls(message, field=field)
