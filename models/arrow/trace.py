"""Read and write replay traces (models.arrow.schema.TRACE): Arrow IPC, Parquet or CSV.

Columns are matched by name and cast to the schema's types, so a hand-made CSV or
Parquet file works; every row then validates as a models.trace.TraceRow, and the first
bad value is reported with its file, row and column.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pydantic import ValidationError

from models.arrow.schema import TRACE
from models.arrow.tables import write_tables
from models.errors import InvalidInput, SluiceError
from models.trace import MAX_TRACE_ROWS, TraceRow, check_trace_rows

_TEXT_COLUMNS = {f.name: pa.string() for f in TRACE if pa.types.is_string(f.type)}


def read_trace(path: str | Path) -> list[TraceRow]:
    """The trace's rows in file order; INVALID_ARGUMENT names the first bad file, row, column."""
    path = Path(path)
    table = _read_table(path)
    if table.num_rows > MAX_TRACE_ROWS:
        raise InvalidInput(f"{path}: {table.num_rows} rows, more than {MAX_TRACE_ROWS}")
    unknown = [name for name in table.column_names if name not in TRACE.names]
    if unknown:
        raise InvalidInput(f"{path}: unknown column {unknown[0]!r}", field=unknown[0])
    for field in TRACE:
        if field.name not in table.column_names:
            if not field.nullable:
                raise InvalidInput(f"{path}: no column {field.name!r}", field=field.name)
            continue
        try:
            table = table.set_column(
                table.column_names.index(field.name),
                field.name,
                table[field.name].cast(field.type),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise InvalidInput(
                f"{path}: column {field.name}: not {field.type} ({error})", field=field.name
            ) from None
    rows = [_row(path, index, row) for index, row in enumerate(table.to_pylist())]
    check_trace_rows(str(path), rows)
    return rows


def write_trace(rows: list[TraceRow], path: str | Path) -> None:
    """An Arrow IPC file of the trace schema (what `sluice replay convert` writes); its name
    ends in `.arrow`."""
    path = Path(path)
    if path.suffix != ".arrow":
        raise InvalidInput(f"{path}: a trace is written as NAME.arrow", field="out")
    columns = {name: [getattr(row, name) for row in rows] for name in TRACE.names}
    write_tables({path.stem: pa.Table.from_pydict(columns, schema=TRACE)}, path.parent)


def _read_table(path: Path) -> pa.Table:
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            options = pa_csv.ConvertOptions(column_types=_TEXT_COLUMNS, strings_can_be_null=True)
            return pa_csv.read_csv(path, convert_options=options)
        if suffix == ".parquet":
            return pq.read_table(path)
        with pa.memory_map(str(path)) as source:
            return pa.ipc.open_file(source).read_all()
    except (pa.ArrowInvalid, OSError) as error:
        raise InvalidInput(f"{path}: not a readable trace ({error})") from None


def _row(path: Path, index: int, row: dict[str, object]) -> TraceRow:
    try:
        return TraceRow.model_validate({k: v for k, v in row.items() if v is not None})
    except ValidationError as error:
        first = error.errors()[0]
        column = str(first["loc"][0]) if first["loc"] else None
        where = f", column {column}" if column else ""
        message = first["msg"].removeprefix("Value error, ")
        raise InvalidInput(f"{path}: row {index}{where}: {message}", field=column) from None
    except SluiceError as error:
        raise InvalidInput(
            f"{path}: row {index}, column {error.field}: {error.message}", field=error.field
        ) from None
