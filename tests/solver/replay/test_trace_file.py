"""The trace boundary: Arrow, Parquet and CSV read alike; a bad file names file, row, column."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from models.arrow.schema import TRACE
from models.arrow.trace import read_trace, write_trace
from models.errors import ErrorCode, InvalidInput
from models.trace import TraceRow

HEADER = "id,queue,submit_s,duration_s,cpu,memory,gpu\n"


def _csv(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(header + body)
    return path


def test_arrow_parquet_and_csv_read_the_same_rows(tmp_path: Path) -> None:
    rows = [
        TraceRow(id="a", queue="q", submit_s=0, duration_s=60, cpu="1", memory="1Gi", gpu="2"),
        TraceRow(id="b", queue="q", submit_s=5.5, duration_s=1, containers=2, cpu="500m"),
    ]
    arrow = tmp_path / "t.arrow"
    write_trace(rows, arrow)
    pq.write_table(pa.ipc.open_file(str(arrow)).read_all(), tmp_path / "t.parquet")
    csv = _csv(
        tmp_path,
        "a,q,0,60,1,1Gi,2,\nb,q,5.5,1,500m,,,2\n",
        "id,queue,submit_s,duration_s,cpu,memory,gpu,containers\n",
    )
    assert read_trace(arrow) == rows
    assert read_trace(tmp_path / "t.parquet") == rows
    assert read_trace(csv) == rows


def test_a_bad_value_names_file_row_and_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,q,0,60,1,1Gi,\nb,q,-4,60,1,1Gi,\n")
    with pytest.raises(InvalidInput) as caught:
        read_trace(path)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.message.startswith(f"{path}: row 1, column submit_s:")
    assert caught.value.field == "submit_s"


def test_a_bad_spelling_names_its_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,q,0,60,lots,1Gi,\n")
    with pytest.raises(InvalidInput, match=r"row 0, column cpu"):
        read_trace(path)


def test_a_value_of_the_wrong_type_names_its_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,q,soon,60,1,1Gi,\n")
    with pytest.raises(InvalidInput, match=r"column submit_s: not double"):
        read_trace(path)


@pytest.mark.parametrize(
    ("header", "body", "expected"),
    [
        (
            "id,queue,duration_s\n",
            "a,q,1\n",
            "row 0: give exactly one of submit_s and submitted_at",
        ),
        ("id,queue,submit_s\n", "a,q,1\n", "no column 'duration_s'"),
        ("id,queue,submit_s,duration_s,colour\n", "a,q,1,1,red\n", "unknown column 'colour'"),
        ("id,queue,submit_s,duration_s\n", "a,q,1,1\na,q,2,1\n", "row 1, column id: 'a' again"),
        ("id,queue,submit_s,duration_s\n", "a,q,1,inf\n", "row 0, column duration_s"),
        ("id,queue,submit_s,duration_s\n", f"{'x' * 254},q,1,1\n", "row 0, column id"),
    ],
)
def test_bad_traces_are_invalid_argument(
    tmp_path: Path, header: str, body: str, expected: str
) -> None:
    with pytest.raises(InvalidInput, match=expected):
        read_trace(_csv(tmp_path, body, header))


def test_mixed_submit_forms_are_refused(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "a,q,1,,1\nb,q,,2026-12-01T00:00:00Z,1\n",
        "id,queue,submit_s,submitted_at,duration_s\n",
    )
    with pytest.raises(InvalidInput, match="row 1, column submit_s: row 0 uses the other form"):
        read_trace(path)


def test_not_a_trace_file(tmp_path: Path) -> None:
    path = tmp_path / "t.arrow"
    path.write_bytes(b"not arrow")
    with pytest.raises(InvalidInput, match="not a readable trace"):
        read_trace(path)
    with pytest.raises(InvalidInput, match="no such file"):
        read_trace(tmp_path / "absent.arrow")


def test_the_schema_carries_its_version() -> None:
    assert TRACE.metadata[b"sluice.trace.version"] == b"1"
