"""Scenario files in JSON.

Issue 12, item 6: "Scenario YAML loads with libyaml's C loader when present; `.json`
scenarios are accepted too." Wherever a scenario file is read (`sluice solve`,
`sluice explain --file`, `sluice whatif run`), a `.json` file gives the same answer as the
same scenario in YAML, and a malformed one is an INVALID_ARGUMENT naming the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from api.cli.main import main
from fixtures import FIXTURES

FIXTURE = FIXTURES / "issue-example.yaml"


def _as_json(tmp_path: Path) -> Path:
    path = tmp_path / "issue-example.json"
    path.write_text(json.dumps(yaml.safe_load(FIXTURE.read_text())))
    return path


def _timeless(stdout: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(stdout)
    data.pop("solver")
    return data


def test_solve_explain_and_whatif_read_json_scenarios(tmp_path: Path) -> None:
    scenario = _as_json(tmp_path)
    runner = CliRunner()
    for command in (["solve"], ["explain", "eval-2", "--file"]):
        from_yaml = runner.invoke(main, [*command, str(FIXTURE), "--json"])
        from_json = runner.invoke(main, [*command, str(scenario), "--json"])
        assert from_json.exit_code == 0, from_json.stderr
        if command == ["solve"]:
            assert _timeless(from_json.stdout) == _timeless(from_yaml.stdout)
        else:
            assert from_json.stdout == from_yaml.stdout
    change = ["--set", "queue.research.scheduling=greedy_capacity"]
    from_yaml = runner.invoke(main, ["whatif", "run", str(FIXTURE), *change])
    from_json = runner.invoke(main, ["whatif", "run", str(scenario), *change])
    assert from_json.exit_code == 0, from_json.stderr
    assert _untimed(from_json.stdout) == _untimed(from_yaml.stdout)


def _untimed(summary: str) -> str:
    """A what-if summary without its solve times."""
    return re.sub(r"\d+\.\d+ s\b", "_ s", summary)


def test_a_malformed_json_scenario_names_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"now": ')
    result = CliRunner().invoke(main, ["solve", str(broken)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"INVALID_ARGUMENT: {broken}: not valid JSON")
