"""`sluice replay` end to end on a small trace: tables, summaries, the picture, bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from api.cli.main import main
from models.arrow.schema import REPLAY_ACTIONS, REPLAY_TICKS

TRACE = """id,queue,submit_s,duration_s,cpu,memory,gpu,max_queued_time_s
a,strict,0,100,1,1Gi,H100:4,
b,strict,10,50,1,1Gi,H100:2,
c,strict,20,50,1,1Gi,H100:2,90
d,greedy,30,600,1,1Gi,H100:1,
"""


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(TRACE)
    return path


def _replay(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["replay", *args])
    return result.exit_code, result.output


def test_replay_writes_tables_and_summaries(trace: Path, fleet_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, output = _replay(str(trace), "--fleet", str(fleet_file), "--out", str(out))
    assert code == 0, output
    assert "MAX_QUEUED_TIME_EXCEEDED 1" in output
    assert sorted(p.name for p in out.iterdir()) == [
        "replay_actions.arrow",
        "replay_ticks.arrow",
        "summary.json",
        "summary.txt",
    ]
    actions = pa.ipc.open_file(str(out / "replay_actions.arrow")).read_all()
    assert actions.schema.equals(REPLAY_ACTIONS, check_metadata=True)
    assert actions["outcome"].to_pylist() == [
        "succeeded",
        "succeeded",
        "MAX_QUEUED_TIME_EXCEEDED",
        "succeeded",
    ]
    ticks = pa.ipc.open_file(str(out / "replay_ticks.arrow")).read_all()
    assert ticks.schema.equals(REPLAY_TICKS, check_metadata=True)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["queues"]["strict"]["head_blocked_s"] == 60.0
    assert (out / "summary.txt").read_text() in output


def test_event_driven_until_and_period(trace: Path, fleet_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["--fleet", str(fleet_file), "--event-driven", "--until", "1m", "--out", str(out)]
    code, output = _replay(str(trace), *args)
    assert code == 0, output
    summary = json.loads((out / "summary.json").read_text())
    # Ticks at 0, 10, 20 and 30 s (arrivals); the next event, a's end at 100, is past 1m.
    assert summary["ticks"] == 4
    assert summary["queues"]["(all)"]["queued"] == 3


def test_the_report_picture(trace: Path, fleet_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the `report` extra is not installed")
    out = tmp_path / "out"
    code, output = _replay(str(trace), "--fleet", str(fleet_file), "--report", "--out", str(out))
    assert code == 0, output
    assert (out / "report.png").read_bytes().startswith(b"\x89PNG")


def test_report_without_matplotlib_says_how_to_install(
    trace: Path, fleet_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "out"
    code, output = _replay(str(trace), "--fleet", str(fleet_file), "--report", "--out", str(out))
    assert code == 1
    assert "INVALID_ARGUMENT: --report draws with matplotlib" in output
    assert ".[report]" in output
    assert not out.exists()


@pytest.mark.parametrize(
    ("body", "extra", "expected"),
    [
        (TRACE.replace("a,strict,0", "a,nobody,0"), [], "unknown queue 'nobody'"),
        (TRACE + "e,strict,x,1,1,1Gi,,\n", [], "column submit_s"),
        (TRACE, ["--period", "0s"], "--period 0s: give a positive period"),
        (TRACE, ["--period", "soon"], "--period"),
    ],
)
def test_bad_input_is_one_line(
    tmp_path: Path, fleet_file: Path, body: str, extra: list[str], expected: str
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(body)
    out = tmp_path / "out"
    code, output = _replay(str(path), "--fleet", str(fleet_file), *extra, "--out", str(out))
    assert code == 1
    assert output.startswith("INVALID_ARGUMENT: ") and expected in output
    assert "Traceback" not in output
    assert not out.exists()


def test_compare_replays_the_fleet_as_given_and_as_changed(
    trace: Path, fleet_file: Path, tmp_path: Path
) -> None:
    """With the strict queue made greedy_capacity its head is never reported blocked: the
    variant's head-blocked time is 0 where the baseline's is 60 s."""
    out = tmp_path / "out"
    change = "queue.strict.scheduling=greedy_capacity"
    args = ["--fleet", str(fleet_file), "--compare", "--set", change, "--out", str(out)]
    code, output = _replay(str(trace), *args)
    assert code == 0, output
    assert f"== variant ({change})" in output
    assert sorted(p.name for p in out.iterdir()) == [
        "baseline",
        "summary.json",
        "summary.txt",
        "variant",
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["baseline"]["queues"]["strict"]["head_blocked_s"] == 60.0
    assert summary["variant"]["queues"]["strict"]["head_blocked_s"] == 0.0
    assert (out / "variant" / "replay_actions.arrow").is_file()


def test_set_without_compare_replays_the_changed_fleet(
    trace: Path, fleet_file: Path, tmp_path: Path
) -> None:
    """Capping the strict queue at 2 H100s fails a (4 of them) at its arrival: b starts when
    it arrives at 10 s, c at 60 s when b ends (waited 40 s), d in its own queue at 30 s."""
    out = tmp_path / "out"
    args = ["--fleet", str(fleet_file), "--event-driven", "--out", str(out)]
    code, output = _replay(str(trace), *args, "--set", "queue.strict.max_accelerators.H100=2")
    assert code == 0, output
    actions = pa.ipc.open_file(str(out / "replay_actions.arrow")).read_all()
    assert actions["started_at"][0].as_py() is None
    assert actions["outcome"][0].as_py() not in ("succeeded", "running", "queued")
    assert actions["waited_s"].to_pylist() == [0.0, 0.0, 40.0, 0.0]


def test_compare_needs_a_change(trace: Path, fleet_file: Path, tmp_path: Path) -> None:
    code, output = _replay(
        str(trace), "--fleet", str(fleet_file), "--compare", "--out", str(tmp_path / "o")
    )
    assert code == 1
    assert output == "INVALID_ARGUMENT: --compare needs at least one --set, --drop or --first-fit\n"


def test_compare_with_the_first_fit_baseline(trace: Path, fleet_file: Path, tmp_path: Path) -> None:
    """Issue 15: "--compare: the same trace under variants (... the first-fit baseline) side by
    side in one report"."""
    out = tmp_path / "out"
    args = ["--fleet", str(fleet_file), "--compare", "--first-fit", "--out", str(out)]
    code, output = _replay(str(trace), *args)
    assert code == 0, output
    assert "== baseline\n" in output
    assert "== variant (first-fit)\n" in output
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"baseline", "variant"}
