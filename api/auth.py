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
import logging
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.errors import InvalidInput, PermissionDenied, Unauthenticated
from models.scenario import read_text


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
MIN_TOKEN_LENGTH = 16
"""Characters of a bearer token: a short one can be guessed by trying."""

log = logging.getLogger("sluice.api")


def _warn_if_shared(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # reading it names the problem
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "auth file %s is readable by group or others (mode %s): its tokens are secrets;"
            " chmod 600 it",
            path,
            oct(stat.S_IMODE(mode)),
        )


def _load_without_duplicates(path: Path) -> Any:
    """The file's data; a key given twice (a token, or a field of one) is an error, which
    plain YAML loading would hide by keeping the last."""
    text = read_text(path)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise InvalidInput(f"{path}: not valid YAML: nested too deeply") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        # The YAML error quotes the file's text, tokens included: only the place is shown.
        raise InvalidInput(f"{path}: not valid YAML{where}") from None
    pending = [(root, "")]
    while pending:
        node, where = pending.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for place, (key, value) in enumerate(node.value, start=1):
                name = str(key.value)
                shown = f"token #{place}" if where == "tokens" else name
                if name in seen:
                    what = "a token" if where == "tokens" else "a key"
                    raise InvalidInput(
                        f"{path}: {where or '(top level)'}: {what} appears twice ({shown},"
                        f" line {key.start_mark.line + 1})",
                        field=where or None,
                    )
                seen.add(name)
                pending.append((value, f"{where}.{shown}" if where else shown))
        elif isinstance(node, yaml.SequenceNode):
            pending.extend((item, where) for item in node.value)
    return yaml.load(text, Loader=yaml.SafeLoader)


def _hide_token(loc: tuple[int | str, ...], tokens: list[Any]) -> list[str]:
    """A validation error's location with the token replaced by its place in the file."""
    parts = [str(part) for part in loc]
    if len(loc) > 1 and loc[0] == "tokens" and loc[1] in tokens:
        parts[1] = f"token #{tokens.index(loc[1]) + 1}"
    return parts


class Authenticator:
    """Maps a bearer token to its principal; `None` tokens mean the server runs open."""

    def __init__(self, tokens: dict[str, TokenEntry] | None) -> None:
        self._tokens = tokens

    @property
    def open(self) -> bool:
        return self._tokens is None

    @classmethod
    def from_file(cls, path: Path | None) -> Authenticator:
        """The tokens of an auth file; no error message ever quotes a token."""
        if path is None:
            return cls(None)
        _warn_if_shared(path)
        data = _load_without_duplicates(path)
        tokens = data.get("tokens") if isinstance(data, dict) else None
        # A token is named by its place in the file: errors go to logs and terminals.
        places = list(tokens) if isinstance(tokens, dict) else []
        try:
            parsed = AuthFile.model_validate(data)
        except ValidationError as error:
            lines = [
                f"{path}: {'.'.join(_hide_token(problem['loc'], places))}:"
                f" {problem['msg'].removeprefix('Value error, ')}"
                for problem in error.errors()
            ]
            raise InvalidInput("\n".join(lines)) from None
        for place, token in enumerate(parsed.tokens, start=1):
            if len(token) < MIN_TOKEN_LENGTH:
                raise InvalidInput(
                    f"{path}: tokens: token #{place} has {len(token)} characters; a token has at"
                    f" least {MIN_TOKEN_LENGTH} (make one with `openssl rand -hex 32`)",
                    field="tokens",
                )
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
