"""The CLI on damaged or hostile input files: a clear INVALID_ARGUMENT, never a crash.

Each command runs in a subprocess, so a segmentation fault fails the test instead of
killing pytest."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from fixtures import FIXTURES
from models.arrow.tables import read_snapshot, write_snapshot_stream
from tests.support.service import SLUICE

REALISTIC = FIXTURES / "realistic-snapshot"


def _sluice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SLUICE, *args], capture_output=True, text=True, timeout=120, check=False)


def _corrupted_snapshot(tmp_path: Path) -> Path:
    """The realistic snapshot with one offset of containers.resources changed: the file's
    header, schema and footer are intact, only body bytes differ."""
    directory = tmp_path / "corrupted"
    shutil.copytree(REALISTIC, directory)
    path = directory / "containers.arrow"
    with pa.memory_map(str(path)) as source:
        whole = source.read_buffer()
        table = ipc.open_file(whole).read_all()
        offsets = table.column("resources").chunk(0).buffers()[1]
        start, size = offsets.address - whole.address, offsets.size
    data = bytearray(path.read_bytes())
    data[start + (size // 8) * 4 + 3] ^= 0x7F  # the high byte of one int32 offset
    path.write_bytes(bytes(data))
    return directory


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ("whatif", "run", "{snapshot}", "--set", "queue.default.priority=1"),
        ("explain", "some-action", "--file", "{snapshot}"),
    ],
)
def test_a_corrupted_arrow_file_is_invalid_argument_naming_file_and_table(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """Issue: "A corrupted Arrow file (header and footer intact, body bytes changed) crashes
    `sluice whatif run` and `sluice explain --file` with a segmentation fault (exit 139).
    Validate fully after reading (`validate(full=True)`), and turn any reader error into
    `INVALID_ARGUMENT` naming the file and table." """
    snapshot = _corrupted_snapshot(tmp_path)
    result = _sluice(*(part.format(snapshot=snapshot) for part in command))
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.stderr.startswith("INVALID_ARGUMENT: "), result.stderr
    assert f"{snapshot / 'containers.arrow'}: not a readable Arrow IPC file" in result.stderr
    assert "(table containers)" in result.stderr


@pytest.mark.slow
def test_solve_on_deep_or_overflowing_yaml_is_invalid_argument(tmp_path: Path) -> None:
    """Issue: "`sluice solve` on a deeply nested YAML prints `INTERNAL: RecursionError`; an
    overflowing quantity prints `INTERNAL: OverflowError` without a field. Both must be clear
    `INVALID_ARGUMENT` errors." """
    deep = tmp_path / "deep.yaml"
    deep.write_text("now: 2026-01-01T00:00:00Z\nqueues: " + "[" * 100_000 + "]" * 100_000)
    result = _sluice("solve", str(deep))
    assert (result.returncode, result.stderr.split(":")[0]) == (1, "INVALID_ARGUMENT")
    assert f"{deep}: not valid YAML" in result.stderr

    overflowing = tmp_path / "overflow.yaml"
    overflowing.write_text(
        "now: 2026-01-01T00:00:00Z\n"
        "actions:\n"
        "- id: a\n"
        "  submitted_at: 2026-01-01T00:00:00Z\n"
        "  max_queued_time: 99999999999d\n"
        "  containers: [{resources: {cpu: 1, gpu: 'H100:99999999999999999999'}}]\n"
    )
    result = _sluice("solve", str(overflowing))
    assert (result.returncode, result.stderr.split(":")[0]) == (1, "INVALID_ARGUMENT")
    assert "actions.0.max_queued_time: " in result.stderr
    assert "'99999999999d' is above the limit of 36500d" in result.stderr
    assert "actions.0.containers.0.gpu: " in result.stderr
    assert "accelerators is above the limit of 65,536" in result.stderr


def test_a_corrupted_snapshot_stream_is_invalid_argument_naming_the_table(
    tmp_path: Path,
) -> None:
    """Issue: "Validate fully after reading (`validate(full=True)`), and turn any reader error
    into `INVALID_ARGUMENT` naming the file and table." Here for a file of back-to-back
    streams (the `GET /snapshot` body), read in a subprocess so a crash fails the test."""
    stream = tmp_path / "snapshot.arrows"
    with stream.open("wb") as sink:
        write_snapshot_stream(read_snapshot(REALISTIC), sink)
    data = bytearray(stream.read_bytes())
    whole = pa.py_buffer(bytes(data))
    reader = pa.BufferReader(whole)
    while True:  # find the containers table's stream and one offset inside its body
        table = ipc.open_stream(reader).read_all()
        if table.schema.metadata[b"sluice.table"] == b"containers":
            break
    offsets = table.column("resources").chunk(0).buffers()[1]
    start = offsets.address - whole.address
    data[start + (offsets.size // 8) * 4 + 3] ^= 0x7F
    stream.write_bytes(bytes(data))
    script = (
        "from models.arrow.tables import read_snapshot\n"
        "from models.errors import InvalidInput\n"
        "try:\n"
        f"    read_snapshot({str(stream)!r})\n"
        "except InvalidInput as error:\n"
        "    print(error.message)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout.startswith(f"{stream}: table containers: not a valid Arrow IPC stream")


@pytest.mark.parametrize("name", ["scenario.yaml", "scenario.json", "snapshot.arrows"])
def test_solve_on_a_binary_file_is_invalid_argument_naming_it(tmp_path: Path, name: str) -> None:
    """Guide: "no traceback reaches a user". A binary file where a scenario is read (here
    bytes that are not UTF-8, under each name `sluice solve` accepts) is a clear
    INVALID_ARGUMENT naming the file, not `INTERNAL: UnicodeDecodeError`."""
    path = tmp_path / name
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe" + bytes(range(256)))
    result = _sluice("solve", str(path))
    assert (result.returncode, result.stderr.split(":")[0]) == (1, "INVALID_ARGUMENT"), (
        result.stderr
    )
    assert str(path) in result.stderr
    assert "Traceback" not in result.stderr


def test_solve_reads_an_arrow_snapshot_as_whatif_does(tmp_path: Path) -> None:
    """Mission: "offline what-if solves on Apache Arrow snapshots". `sluice solve` takes the
    snapshots `sluice whatif` takes: a directory of IPC files and one file of IPC streams,
    with the same answer."""
    stream = tmp_path / "snapshot.arrows"
    with stream.open("wb") as sink:
        write_snapshot_stream(read_snapshot(REALISTIC), sink)
    answers = []
    for path in (REALISTIC, stream):
        result = _sluice("solve", str(path), "--json", "--time-limit", "0.2")
        assert result.returncode == 0, result.stderr
        answers.append(json.loads(result.stdout))
    for answer in answers:
        del answer["solver"]  # timings
    assert answers[0] == answers[1]
    assert answers[0]["scheduled"]
