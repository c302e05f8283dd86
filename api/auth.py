"""Bearer tokens from a YAML file, each with a role.

    tokens:
      3f9c...:  {role: admin, name: platform}
      a71e...:  {role: submitter, name: research-team, queues: [research]}
      c0d4...:  {role: viewer}
      9b2f...:  {role: executor, name: gpu-runner}

admin manages queues, clusters, settings and everything else; submitter
submits and cancels on the queues it is granted (and defines their reusable
environments); executor reports what happened to scheduled actions; viewer
reads. Every role may read. Without a file the server runs open: every caller
is an admin.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.errors import InvalidInput, PermissionDenied, Unauthenticated
from models.scenario import read_yaml, validation_message


class Role(StrEnum):
    ADMIN = "admin"
    SUBMITTER = "submitter"
    EXECUTOR = "executor"
    VIEWER = "viewer"


class TokenEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role
    name: str | None = None
    queues: list[str] = Field(default_factory=list)  # for submitters: the queues granted


class AuthFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: dict[str, TokenEntry]


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role
    queues: frozenset[str] = frozenset()

    def describe(self) -> str:
        return f"{self.name} ({self.role.value})"

    def require_admin(self, doing: str) -> None:
        if self.role is not Role.ADMIN:
            raise PermissionDenied(f"{self.describe()} may not {doing}: that needs an admin token")

    def require_queue(self, queue: str, doing: str) -> None:
        """Submitting, cancelling and defining environments: admins, or submitters granted it."""
        if self.role is Role.ADMIN:
            return
        if self.role is Role.SUBMITTER and queue in self.queues:
            return
        granted = ", ".join(sorted(self.queues)) or "none"
        raise PermissionDenied(
            f"{self.describe()} may not {doing} on queue {queue}"
            + (f" (granted queues: {granted})" if self.role is Role.SUBMITTER else ""),
            field="queue",
        )

    def require_executor(self, doing: str) -> None:
        if self.role not in (Role.ADMIN, Role.EXECUTOR):
            raise PermissionDenied(
                f"{self.describe()} may not {doing}: that needs an executor or admin token"
            )


OPEN = Principal(name="anonymous", role=Role.ADMIN)


class Authenticator:
    """Maps a bearer token to its principal; `None` tokens mean the server runs open."""

    def __init__(self, tokens: dict[str, TokenEntry] | None) -> None:
        self._tokens = tokens

    @property
    def open(self) -> bool:
        return self._tokens is None

    @classmethod
    def from_file(cls, path: Path | None) -> Authenticator:
        if path is None:
            return cls(None)
        data = read_yaml(path)
        try:
            parsed = AuthFile.model_validate(data)
        except ValidationError as error:
            raise InvalidInput(validation_message(error, str(path))) from None
        return cls(parsed.tokens)

    def authenticate(self, authorization: str | None) -> Principal:
        if self._tokens is None:
            return OPEN
        if not authorization:
            raise Unauthenticated(
                "this server needs a bearer token: send 'Authorization: Bearer <token>'"
                " (the CLI and client read SLUICE_TOKEN)"
            )
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the Authorization header must read 'Bearer <token>'")
        token = token.strip()
        for index, (known, entry) in enumerate(self._tokens.items(), start=1):
            if hmac.compare_digest(known.encode(), token.encode()):
                return Principal(
                    name=entry.name or f"token #{index} of the auth file",
                    role=entry.role,
                    queues=frozenset(entry.queues),
                )
        raise Unauthenticated("unknown bearer token")
