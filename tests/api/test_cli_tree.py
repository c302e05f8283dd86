"""The command tree as a whole: every option has help, commands load lazily and say the same
help loaded or not (issue 17, "CLI polish")."""

from __future__ import annotations

from collections.abc import Iterator

import click

from api.cli.lazy import LazyGroup, load_command, short_help_of
from api.cli.main import PLACES, SHOWN_DEFAULT_URL, main
from api.client import DEFAULT_URL
from tests.support.imports import loaded_after


def _walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{path} {name} does not load"
            yield from _walk(sub, f"{path} {name}")


def test_every_option_has_help() -> None:
    """ "help text on every option (`get actions --state/--limit`, `solve --time-limit` have
    none)" """
    missing = [
        f"{path} {param.opts[0]}"
        for path, command in _walk(main, "sluice")
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]
    assert missing == []


def test_placed_commands_load_under_their_names_with_the_help_read_from_source() -> None:
    for group, commands in PLACES.items():
        assert isinstance(group, LazyGroup)
        for name, target in commands:
            command = load_command(target)
            assert command.name == name, target
            assert short_help_of(target) in (None, command.get_short_help_str()), target


def test_sluice_help_imports_no_command_module() -> None:
    """ "command groups imported lazily so `sluice --help` starts fast" """
    modules = {t.partition(":")[0] for places in PLACES.values() for _, t in places}
    modules |= {"bench.cli", "pyarrow", "fastapi", "httpx", "pydantic"}
    code = (
        "from click.testing import CliRunner\n"
        "from api.cli.main import main\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0"
    )
    assert loaded_after(code, modules) == []


def test_the_root_help_shows_the_clients_default_url() -> None:
    assert SHOWN_DEFAULT_URL == DEFAULT_URL


def test_every_get_takes_output_json_and_yaml() -> None:
    """ "`-o json|yaml` on every `get`" """
    get = main.get_command(click.Context(main), "get")
    assert isinstance(get, click.Group)
    lacking = []
    for path, command in _walk(get, "get"):
        if isinstance(command, click.Group):
            continue
        output = next((p for p in command.params if "-o" in getattr(p, "opts", [])), None)
        choices = getattr(output.type, "choices", ()) if output else ()
        if not {"json", "yaml"} <= set(choices):
            lacking.append(path)
    assert lacking == []
