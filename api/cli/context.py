"""What every `sluice` command shares: the server connection, the output option, how
results are printed and how errors reach the user.

The root group (api.cli.main) puts a `Remote` in the click context; commands that
talk to a server take it with `@pass_remote`. Errors go to stderr as
`CODE: message` with exit status 1, never as a traceback.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from api.cli.lazy import LazyGroup
from models.errors import SluiceError

if TYPE_CHECKING:  # httpx loads when a command first talks to a server, not for `--help`
    from api.client import SluiceClient

OUTPUT = click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json", "yaml"]),
    default="text",
    help="Output format: text for people, or the data as JSON or YAML.",
)


class FiniteRange(click.FloatRange):
    """A FloatRange that also refuses nan, which compares false with both bounds and so
    passes any range, and the infinities a range without a maximum lets through."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class SluiceGroup(LazyGroup):
    """A group whose commands report Sluice errors as `CODE: message` on stderr."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SluiceError as error:
            click.echo(f"{error.code.value}: {error.message}", err=True)
            ctx.exit(1)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`sluice get queue --watch | head`): it has what it
            # wanted, so stop quietly. Output still buffered must not fail again at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except Exception as error:  # the promise is: no traceback reaches a user
            if os.environ.get("SLUICE_DEBUG"):
                raise
            click.echo(
                f"INTERNAL: {type(error).__name__}: {error} (set SLUICE_DEBUG=1 for a traceback)",
                err=True,
            )
            ctx.exit(1)


@dataclass
class Remote:
    """Where client commands send requests; the connection opens on first use."""

    url: str | None = None
    token: str | None = None
    connection: SluiceClient | None = None

    @property
    def client(self) -> SluiceClient:
        if self.connection is None:
            from api.client import SluiceClient

            self.connection = SluiceClient(self.url, self.token)
        return self.connection


pass_remote = click.make_pass_decorator(Remote)


def emit(data: Any, output: str, text: Callable[[Any], str]) -> None:
    """`data` as JSON for `-o json`, YAML for `-o yaml`, else as `text` renders it."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        click.echo(as_yaml(data))
    else:
        click.echo(text(data))


def as_yaml(data: Any) -> str:
    import yaml  # only commands that print YAML pay for it

    return yaml.safe_dump(data, sort_keys=False).rstrip()


def terminal_width() -> int | None:
    """The width a table must fit: `$COLUMNS`, or the terminal's; None when the output goes
    to a pipe or a file, whose reader gets every character."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdecimal() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def emit_frames(stream: Iterator[Any], output: str, text: Callable[[Any], str]) -> None:
    """Redraw on a terminal; otherwise one frame after another."""
    redraw = sys.stdout.isatty() and output == "text"
    for data in stream:
        if redraw:
            click.clear()
        emit(data, output, text)
        if not redraw:
            click.echo("")
