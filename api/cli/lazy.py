"""Command groups that import a command's module only when that command runs.

`sluice --help` lists every command with its one-line help; importing them all for that
pulls in pydantic models, httpx and pyarrow. A lazily placed command is named by
`module:attribute`; its short help is read from the function's docstring in the
module's source, without importing it (tests/api/test_cli_tree.py checks that the two
agree for every command); a command a factory makes is imported to list it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path

import click


class LazyGroup(click.Group):
    """A group whose commands are placed as (name, "module:attribute") pairs."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy: dict[str, str] = {}

    def place(self, name: str, target: str) -> None:
        self.lazy[name] = target

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(load_command(self.lazy[cmd_name]), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, with the short help of commands not loaded read from source."""
        limit = formatter.width - 6 - max(map(len, self.list_commands(ctx)), default=0)
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is not None:
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
            else:
                text = short_help_of(self.lazy[name], limit)
                if text is None:  # made by a factory: only the command itself knows its help
                    loaded = self.get_command(ctx, name)
                    text = loaded.get_short_help_str(limit) if loaded else ""
                rows.append((name, text))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def load_command(target: str) -> click.Command:
    module, _, attribute = target.partition(":")
    command = getattr(importlib.import_module(module), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


def short_help_of(target: str, limit: int = 45) -> str | None:
    """The first line of help of the command function `target`, as click would show it;
    None if the module does not define it with `def`."""
    module, _, attribute = target.partition(":")
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    tree = ast.parse(Path(spec.origin).read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attribute:
            docstring = ast.get_docstring(node, clean=False)
            if docstring is None:
                return ""
            return click.Command(None, help=inspect.cleandoc(docstring)).get_short_help_str(limit)
    return None
