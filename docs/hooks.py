"""MkDocs hook: the reference pages are generated from the code at every build.

A page asks for a generated part with a marker line; the hook puts the part in its place:

    <!-- sluice:openapi -->         every operation of the service's OpenAPI document
    <!-- sluice:error-statuses -->  models.errors.HTTP_STATUS: error code to HTTP status
    <!-- sluice:arrow-tables -->    every schema constant of models.arrow.schema
    <!-- sluice:cli -->             `--help` of every command of the `sluice` command tree

A hook rather than mkdocs-gen-files: the hand-written part of each page stays an ordinary
Markdown file next to the others, and no plugin package is needed.
"""

from __future__ import annotations

import html
import importlib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import click
import pyarrow as pa
import yaml
from mkdocs.exceptions import PluginError
from mkdocs.plugins import get_plugin_logger

log = get_plugin_logger(__name__)

COLUMN_NOTES = Path(__file__).with_name("arrow-columns.yml")
REPOSITORY = Path(__file__).resolve().parents[1]
HELP_WIDTH = 100  # the same help text on every machine, whatever its terminal


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, render in GENERATORS.items():
        tag = f"<!-- sluice:{marker} -->"
        if tag in markdown:
            markdown = markdown.replace(tag, render())
    return markdown


def _cell(text: object) -> str:
    """A value safe inside one Markdown table cell: one line, no bare `|` (the cell separator)
    and `<` `>` `&` escaped. A code span holding a pipe becomes a <code> element, since Markdown
    would show a backslash escape inside a code span as it is."""
    parts = " ".join(str(text).split()).split("`")
    for i, part in enumerate(parts):
        if i % 2 == 0:
            parts[i] = html.escape(part, quote=False).replace("|", "&#124;")
        elif "|" in part:
            parts[i] = "<code>" + html.escape(part, quote=False).replace("|", "&#124;") + "</code>"
        else:
            parts[i] = f"`{part}`"
    return "".join(parts)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# --- HTTP API ------------------------------------------------------------------------------------


def _openapi() -> dict[str, Any]:
    from api.app import create_app
    from api.config import ServiceSettings

    # The app is only built, never started: the store opens in its lifespan.
    return create_app(ServiceSettings()).openapi()


def _schema_anchor(name: str) -> str:
    return "schema-" + name.lower().replace("_", "-")


def _type(schema: dict[str, Any]) -> str:
    """A JSON schema written the way a reader says it: `list of Action`, `string or null`."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_schema_anchor(name)})"
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(_type(part) for part in schema.get("anyOf", schema.get("oneOf")))
    if "allOf" in schema:
        return " and ".join(_type(part) for part in schema["allOf"])
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type")
    if kind == "array":
        return "list of " + _type(schema.get("items", {}))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "map of string to " + _type(schema["additionalProperties"])
    if isinstance(kind, list):
        return " or ".join(kind)
    text = str(kind or "any")
    if "format" in schema:
        text += f" ({schema['format']})"
    return text


def _body(content: dict[str, Any]) -> str:
    return "; ".join(
        f"`{media}`: {_type(spec['schema'])}" if "schema" in spec else f"`{media}`"
        for media, spec in content.items()
    )


def _operation(method: str, path: str, operation: dict[str, Any]) -> Iterator[str]:
    yield f"### `{method.upper()} {path}`"
    yield ""
    yield f"**{operation.get('summary', '')}**" + (
        " (needs a bearer token)" if operation.get("security") else ""
    )
    if operation.get("description"):
        yield ""
        yield operation["description"].strip()
    parameters = operation.get("parameters", [])
    if parameters:
        yield ""
        yield _table(
            ["parameter", "in", "required", "type", "description"],
            [
                [
                    f"`{p['name']}`",
                    p["in"],
                    "yes" if p.get("required") else "no",
                    _type(p.get("schema", {})),
                    _cell(p.get("description", "")),
                ]
                for p in parameters
            ],
        )
    body = operation.get("requestBody")
    if body:
        yield ""
        required = "required" if body.get("required") else "optional"
        yield f"Request body ({required}): {_body(body.get('content', {}))}"
    yield ""
    yield _table(
        ["status", "response", "body"],
        [
            [f"`{status}`", _cell(response.get("description", "")), _body(response["content"])]
            if response.get("content")
            else [f"`{status}`", _cell(response.get("description", "")), ""]
            for status, response in operation.get("responses", {}).items()
        ],
    )
    yield ""


def _component(name: str, schema: dict[str, Any]) -> Iterator[str]:
    yield f"### {name} {{#{_schema_anchor(name)}}}"
    yield ""
    if schema.get("description"):
        yield _cell(schema["description"])
        yield ""
    properties = schema.get("properties")
    if properties:
        required = set(schema.get("required", []))
        yield _table(
            ["field", "type", "required", "description"],
            [
                [
                    f"`{field}`",
                    _type(spec),
                    "yes" if field in required else "no",
                    _cell(spec.get("description", "")),
                ]
                for field, spec in properties.items()
            ],
        )
    else:
        yield _type(schema)
    yield ""


def render_openapi() -> str:
    document = _openapi()
    info = document["info"]
    lines = [
        f"OpenAPI {document['openapi']}, {info['title']} {info['version']}: "
        f"{info.get('summary', '')}",
        "",
        "## Operations",
        "",
    ]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            lines += _operation(method, path, operation)
    lines += ["## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        lines += _component(name, schema)
    return "\n".join(lines)


def render_error_statuses() -> str:
    from models.errors import HTTP_STATUS

    return _table(
        ["code", "HTTP status"],
        [[f"`{code.value}`", str(status)] for code, status in HTTP_STATUS.items()],
    )


# --- Arrow tables --------------------------------------------------------------------------------


def _column_notes() -> dict[str, dict[str, Any]]:
    notes: dict[str, dict[str, Any]] = yaml.safe_load(COLUMN_NOTES.read_text()) or {}
    return notes


def _schema_groups(module: Any) -> list[tuple[str, dict[str, pa.Schema]]]:
    """The schema constants in groups a reader looks for; a constant in no dict goes last."""
    snapshot: dict[str, pa.Schema] = module.SNAPSHOT_TABLES
    quota_snapshot: dict[str, pa.Schema] = module.QUOTA_SNAPSHOT_TABLES
    result: dict[str, pa.Schema] = module.RESULT_TABLES
    comparison: dict[str, pa.Schema] = module.COMPARISON_TABLES
    replay: dict[str, pa.Schema] = module.REPLAY_TABLES
    grouped = [
        (
            "Snapshot tables: capped queues",
            {n: s for n, s in snapshot.items() if n not in quota_snapshot},
        ),
        ("Snapshot tables: quota-managed job queues", dict(quota_snapshot)),
        (
            "Result tables: capped queues",
            {n: s for n, s in result.items() if not n.startswith("quota_")},
        ),
        (
            "Result tables: quota-managed job queues",
            {n: s for n, s in result.items() if n.startswith("quota_")},
        ),
        ("What-if comparison tables", dict(comparison)),
        ("Replay: the trace and the tables written", {"trace": module.TRACE} | replay),
    ]
    seen = {id(schema) for _, group in grouped for schema in group.values()}
    rest = {
        schema.metadata[module.TABLE_KEY].decode(): schema
        for schema in vars(module).values()
        if isinstance(schema, pa.Schema) and id(schema) not in seen
    }
    grouped.append(("Sweep tables", rest))
    return grouped


def _version(module: Any, schema: pa.Schema) -> str:
    for key in (module.SNAPSHOT_VERSION_KEY, module.RESULT_VERSION_KEY, module.TRACE_VERSION_KEY):
        if key in schema.metadata:
            return f"`{key.decode()}` = `{schema.metadata[key].decode()}`"
    return "none"


def render_arrow_tables() -> str:
    module = importlib.import_module("models.arrow.schema")
    notes = _column_notes()
    lines: list[str] = [
        f"Snapshot schema version **{module.SNAPSHOT_VERSION}**, result schema version "
        f"**{module.RESULT_VERSION}**; every table's metadata also names the table under "
        f"`{module.TABLE_KEY.decode()}`.",
        "",
    ]
    described: set[str] = set()
    for title, tables in _schema_groups(module):
        lines += [f"## {title}", ""]
        for name, schema in tables.items():
            described.add(name)
            note = notes.get(name, {})
            columns = note.get("columns", {})
            unknown = set(columns) - set(schema.names)
            if unknown:
                raise PluginError(
                    f"{COLUMN_NOTES.name}: table {name} has no column {', '.join(sorted(unknown))}"
                )
            lines += [f"### {name}", ""]
            if note.get("rows"):
                lines += [f"One row per {note['rows']}. Metadata: {_version(module, schema)}.", ""]
            else:
                lines += [f"Metadata: {_version(module, schema)}.", ""]
            rows = []
            for field in schema:
                metadata = field.metadata or {}
                description = metadata.get(b"description", b"").decode() or columns.get(
                    field.name, ""
                )
                if not description:
                    log.warning("table %s, column %s: no description", name, field.name)
                rows.append(
                    [
                        f"`{field.name}`",
                        f"`{field.type}`",
                        "yes" if field.nullable else "no",
                        _cell(description),
                    ]
                )
            lines += [_table(["column", "type", "nullable", "description"], rows), ""]
            if note.get("notes"):
                lines += [note["notes"].strip(), ""]
    stale = set(notes) - described
    if stale:
        raise PluginError(f"{COLUMN_NOTES.name}: no schema for {', '.join(sorted(stale))}")
    return "\n".join(lines)


# --- command line --------------------------------------------------------------------------------


def _cli_root() -> click.Command:
    """The command the `sluice` console script runs, wherever its module lives."""
    scripts = list(entry_points(group="console_scripts", name="sluice"))
    if len(scripts) != 1:
        raise PluginError("no `sluice` console script: install Sluice first (pip install -e .)")
    root = scripts[0].load()
    if not isinstance(root, click.Command):
        raise PluginError(f"the sluice entry point {scripts[0].value} is not a click command")
    return root


def _context(
    command: click.Command, name: str, parent: click.Context | None = None
) -> click.Context:
    settings = {
        **command.context_settings,
        "max_content_width": HELP_WIDTH,
        "terminal_width": HELP_WIDTH,
    }
    return click.Context(command, info_name=name, parent=parent, **settings)


def _commands(
    command: click.Command, context: click.Context
) -> Iterator[tuple[click.Command, click.Context]]:
    yield command, context
    if isinstance(command, click.Group):
        for name in command.list_commands(context):
            child = command.get_command(context, name)
            if child is not None and not child.hidden:
                yield from _commands(child, _context(child, name, context))


def render_cli() -> str:
    lines: list[str] = []
    for command, context in _commands(_cli_root(), _context(_cli_root(), "sluice")):
        lines += [
            f"### `{context.command_path}`",
            "",
            "```text",
            # Defaults computed from the checkout's path read the same on every machine.
            command.get_help(context).replace(f"{REPOSITORY}/", ""),
            "```",
            "",
        ]
    return "\n".join(lines)


GENERATORS: dict[str, Callable[[], str]] = {
    "openapi": render_openapi,
    "error-statuses": render_error_statuses,
    "arrow-tables": render_arrow_tables,
    "cli": render_cli,
}
