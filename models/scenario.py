"""Scenario files: one YAML (or JSON) document holding a whole snapshot (see
docs/scenario-files.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from models.construct import collections_deferred
from models.errors import InvalidInput
from models.snapshot import Snapshot


def validation_message(error: ValidationError, source: str) -> str:
    """One line per problem, each naming where it is (`queues.0.max_resources.cpu`)."""
    lines = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"{source}: {where}: {message}")
    return "\n".join(lines)


def snapshot_from_dict(data: Any, source: str = "snapshot") -> Snapshot:
    if not isinstance(data, dict):
        raise InvalidInput(f"{source}: expected a mapping with now, queues, clusters and actions")
    try:
        with collections_deferred():  # a snapshot's models live on, and hold no cycle
            return Snapshot.model_validate(data)
    except ValidationError as error:
        raise InvalidInput(validation_message(error, source)) from None


# libyaml's loader reads a large scenario about seven times faster; PyYAML built without it
# has only the pure-Python one, which gives the same data.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_text(path: Path) -> str:
    """A file's text; an unreadable file is an error naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidInput(f"{path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise InvalidInput(
            f"{path}: not UTF-8 text (byte {error.start}): a scenario file is YAML or JSON"
        ) from None


def read_yaml(path: Path) -> Any:
    """A YAML (or JSON) file's data; an unreadable or malformed file is an error naming it."""
    if path.suffix.lower() == ".json":
        return read_json(path)
    text = read_text(path)
    try:
        # A large file is hundreds of thousands of new objects and no cycle: collections
        # started by their count were half the load of the M scenario (1.5 s → 0.76 s).
        with collections_deferred():
            return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as error:
        raise InvalidInput(f"{path}: not valid YAML: {error}") from None
    except RecursionError:
        # PyYAML builds nested values recursively; no scenario nests more than a few levels.
        raise InvalidInput(f"{path}: not valid YAML: nested too deeply") from None


SCENARIO_SUFFIXES = (".yaml", ".yml", ".json")
"""The suffixes of a scenario file; anything else where a snapshot is read is Arrow."""


def read_json(path: Path) -> Any:
    """A `.json` file's data: the JSON parser, many times faster than YAML's on large files."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidInput(f"{path}: not valid JSON: {error}") from None
    except RecursionError:
        raise InvalidInput(f"{path}: not valid JSON: nested too deeply") from None


def load_scenario(path: str | Path) -> Snapshot:
    """Read and validate a scenario file; every error names the file and the field."""
    path = Path(path)
    return snapshot_from_dict(read_yaml(path), str(path))


def dump_scenario(snapshot: Snapshot) -> str:
    """The scenario file for `snapshot`; loading it gives an equal snapshot."""
    data = snapshot.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    data["now"] = snapshot.model_dump(mode="json")["now"]
    return yaml.safe_dump(data, sort_keys=False)
