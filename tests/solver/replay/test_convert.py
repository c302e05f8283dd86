"""`sluice replay convert`: the Alibaba openb pods and a generic job CSV as replay traces."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli.main import main
from fixtures.generators.alibaba import TraceMissing, replay_fleet, trace_dir
from fixtures.generators.job_csv import JobColumns, job_csv_trace
from models.arrow.tables import read_snapshot
from models.arrow.trace import read_trace
from models.errors import InvalidInput

JOBS = """job,user,submitted,runtime,gpu,cpu,mem_gb
j1,alice,0,3600,4,16,64
j2,bob,30,1h30m,0,2,8
"""


def _jobs(tmp_path: Path, body: str = JOBS) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(body)
    return path


COLUMNS = JobColumns(
    submit="submitted",
    duration="runtime",
    gpus="gpu",
    cpus="cpu",
    memory="mem_gb",
    queue="user",
    id="job",
)


def test_a_job_csv_becomes_trace_rows(tmp_path: Path) -> None:
    """Bare memory numbers are GiB; a GPU count of 0 asks for none; durations may be spelt."""
    rows = job_csv_trace(_jobs(tmp_path), COLUMNS)
    assert [(r.id, r.queue, r.submit_s, r.duration_s) for r in rows] == [
        ("j1", "alice", 0.0, 3600.0),
        ("j2", "bob", 30.0, 5400.0),
    ]
    assert (rows[0].cpu, rows[0].memory, rows[0].gpu) == ("16", "64Gi", "4")
    assert rows[1].gpu is None


def test_a_bad_job_row_names_file_row_and_column(tmp_path: Path) -> None:
    path = _jobs(tmp_path, JOBS + "j3,carol,60,soon,1,1,1\n")
    with pytest.raises(InvalidInput, match=rf"{path}: row 2, column runtime"):
        job_csv_trace(path, COLUMNS)
    path = _jobs(tmp_path, JOBS + "j3,carol,60,10,1,lots,1\n")
    with pytest.raises(InvalidInput, match=r"row 2, column cpu"):
        job_csv_trace(path, COLUMNS)
    with pytest.raises(InvalidInput, match="no column 'queue'"):
        job_csv_trace(path, JobColumns(submit="submitted", duration="runtime"))


def test_convert_csv_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "trace.arrow"
    args = ["replay", "convert", "csv", str(_jobs(tmp_path)), "--out", str(out)]
    args += ["--submit", "submitted", "--duration", "runtime", "--gpus", "gpu", "--cpus", "cpu"]
    args += ["--memory", "mem_gb", "--queue", "user", "--id", "job"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.output == f"2 actions -> {out}\n"
    assert read_trace(out) == job_csv_trace(_jobs(tmp_path), COLUMNS)


def test_convert_alibaba_end_to_end(tmp_path: Path) -> None:
    """The openb pods in creation order, on the queues of the benchmark's snapshots."""
    try:
        trace_dir()
    except TraceMissing as error:
        pytest.skip(f"Alibaba trace absent: {error.message}")
    out, fleet = tmp_path / "openb.arrow", tmp_path / "fleet"
    args = ["replay", "convert", "alibaba", "--out", str(out), "--fleet-out", str(fleet)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = read_trace(out)
    assert len(rows) == 8152
    assert [r.submit_s for r in rows] == sorted(r.submit_s or 0 for r in rows)
    queues = {q.name for q in read_snapshot(fleet).queues}
    assert {r.queue for r in rows} <= queues
    first = rows[0]
    # openb-pod-0000: 12 cores, 16 GiB, one GPU, scheduled at 0 and deleted at 12,537,496 s.
    assert (first.id, first.cpu, first.memory, first.duration_s) == (
        "openb-pod-0000",
        "12000m",
        "16384Mi",
        12_537_496.0,
    )


def test_convert_alibaba_a_window_denser_on_fewer_nodes(tmp_path: Path) -> None:
    """Day 148 alone (678 pods, docs/benchmarks.md), arriving twice as fast from its start, on
    a fleet with a tenth of each pool's nodes."""
    try:
        trace_dir()
    except TraceMissing as error:
        pytest.skip(f"Alibaba trace absent: {error.message}")
    out, fleet = tmp_path / "openb.arrow", tmp_path / "fleet"
    args = ["replay", "convert", "alibaba", "--out", str(out), "--fleet-out", str(fleet)]
    args += ["--first-day", "148", "--days", "1", "--density", "2", "--nodes-fraction", "0.1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = read_trace(out)
    assert len(rows) == 678
    assert all(0 <= (r.submit_s or 0) < 86_400 / 2 for r in rows)
    full = {(c.name, p.name): p.nodes for c in replay_fleet().clusters for p in c.node_pools}
    shrunk = {
        (c.name, p.name): p.nodes for c in read_snapshot(fleet).clusters for p in c.node_pools
    }
    assert shrunk == {pool: max(1, round(nodes * 0.1)) for pool, nodes in full.items()}


@pytest.mark.parametrize(
    ("option", "value"),
    [("--density", "nan"), ("--density", "inf"), ("--days", "nan"), ("--first-day", "nan"),
     ("--nodes-fraction", "nan"), ("--density", "0"), ("--nodes-fraction", "2")],
)  # fmt: skip
def test_convert_alibaba_refuses_a_window_out_of_range(
    tmp_path: Path, option: str, value: str
) -> None:
    """Issue 15: "Converters for two public trace formats", with the window options bounded
    where they are parsed: nan compares false with every bound, so it is refused by name too,
    before anything is read or written."""
    out = tmp_path / "openb.arrow"
    result = CliRunner().invoke(
        main, ["replay", "convert", "alibaba", option, value, "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output
    assert not out.exists()
