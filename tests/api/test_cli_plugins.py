"""Commands of other installed packages join `sluice` through the `sluice.commands` entry points."""

from __future__ import annotations

from importlib.metadata import entry_points

from click.testing import CliRunner

from api.cli.main import COMMAND_ENTRY_POINTS, main


def test_bench_is_registered_as_an_entry_point_not_imported_by_api() -> None:
    registered = {entry.name: entry.value for entry in entry_points(group=COMMAND_ENTRY_POINTS)}
    assert registered["bench"] == "bench.cli:bench"


def test_sluice_bench_help_still_works() -> None:
    result = CliRunner().invoke(main, ["bench", "--help"])
    assert result.exit_code == 0, result.output
    assert "Benchmark the tick engine" in result.output
    assert "--scenario" in result.output


def test_sluice_help_lists_the_plugin_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    assert "bench" in result.output.split("Commands:", 1)[1]
