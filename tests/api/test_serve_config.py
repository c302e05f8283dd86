"""`sluice serve` options from the environment and a config file, printed at start."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner

from api.cli.main import main
from api.cli.service import JsonLogFormatter


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """uvicorn.run replaced: serve stops where it would bind the port."""
    runs: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: runs.append(options))
    return runs


def test_environment_over_config_file_over_defaults(
    tmp_path: Path, no_server: list[dict[str, Any]]
) -> None:
    """Issue 17: "Every `serve` option settable from the environment (`SLUICE_DB`,
    `SLUICE_PORT`, …) and from a config file; the effective configuration printed at start"."""
    config = tmp_path / "sluice.yaml"
    config.write_text(f"db: {tmp_path / 'file.db'}\nport: 9001\nperiod: 5\nlog-level: warning\n")
    result = CliRunner().invoke(
        main,
        ["serve", "--config", str(config)],
        env={"SLUICE_PORT": "9002", "SLUICE_TIME_LIMIT": "1.5"},
    )
    assert result.exit_code == 0, result.output
    assert [(run["host"], run["port"], run["log_level"]) for run in no_server] == [
        ("127.0.0.1", 9002, "warning")
    ]
    line = next(line for line in result.stderr.splitlines() if line.startswith("config: "))
    for setting in (f"db={tmp_path / 'file.db'}", "port=9002", "period=5.0", "time_limit=1.5"):
        assert setting in line.split(), line
    assert (tmp_path / "file.db").exists()
    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--port", "9003"])
    assert no_server[-1]["port"] == 9003


def test_an_unknown_option_in_the_config_file_is_refused(
    tmp_path: Path, no_server: list[dict[str, Any]]
) -> None:
    config = tmp_path / "sluice.yaml"
    config.write_text("prot: 9001\n")
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code != 0 and "unknown options prot" in result.output
    assert no_server == []


def test_json_logs_carry_the_tick_and_action_ids() -> None:
    """Issue 17: "Structured JSON logs on request (`--log-format json`), with tick number and
    action ids as fields"."""
    record = logging.LogRecord("sluice.tick", logging.DEBUG, "", 0, "tick %d", (3,), None)
    record.__dict__.update(tick=3, scheduled=["a1", "a2"])
    line = json.loads(JsonLogFormatter().format(record))
    assert (line["message"], line["level"], line["logger"]) == ("tick 3", "debug", "sluice.tick")
    assert (line["tick"], line["scheduled"]) == (3, ["a1", "a2"])


def test_serve_takes_log_format_json(tmp_path: Path, no_server: list[dict[str, Any]]) -> None:
    db = tmp_path / "s.db"
    result = CliRunner().invoke(main, ["serve", "--db", str(db)], env={"SLUICE_LOG_FORMAT": "json"})
    assert result.exit_code == 0, result.output
    assert no_server[0]["log_config"] is None
    assert "log_format=json" in result.stderr


def test_the_access_log_is_on_unless_turned_off(
    tmp_path: Path, no_server: list[dict[str, Any]]
) -> None:
    """A line per request by default (D310); `--no-access-log`, SLUICE_ACCESS_LOG or the
    config file turn it off, and the printed configuration says which."""
    db = str(tmp_path / "s.db")
    result = CliRunner().invoke(main, ["serve", "--db", db])
    assert result.exit_code == 0, result.output
    assert no_server[-1]["access_log"] is True and "access_log=True" in result.stderr
    result = CliRunner().invoke(main, ["serve", "--db", db, "--no-access-log"])
    assert no_server[-1]["access_log"] is False and "access_log=False" in result.stderr
    result = CliRunner().invoke(main, ["serve", "--db", db], env={"SLUICE_ACCESS_LOG": "false"})
    assert no_server[-1]["access_log"] is False
    config = tmp_path / "sluice.yaml"
    config.write_text(f"db: {db}\naccess-log: false\n")
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert no_server[-1]["access_log"] is False


def test_the_heap_is_frozen_between_full_collections_unless_turned_off(
    tmp_path: Path, no_server: list[dict[str, Any]]
) -> None:
    """`--full-gc-every` (api.heap): 600 s by default, 0 leaves collections to Python; the
    printed configuration says which."""
    db = str(tmp_path / "s.db")
    result = CliRunner().invoke(main, ["serve", "--db", db])
    assert result.exit_code == 0, result.output
    assert "full_gc_every=600.0" in result.stderr
    result = CliRunner().invoke(main, ["serve", "--db", db, "--full-gc-every", "0"])
    assert result.exit_code == 0, result.output
    assert "full_gc_every=python" in result.stderr
    for garbage in ("nan", "inf", "-1", "86401", "often"):
        result = CliRunner().invoke(main, ["serve", "--db", db, "--full-gc-every", garbage])
        assert result.exit_code == 2, (garbage, result.output)
        assert "--full-gc-every" in result.output
