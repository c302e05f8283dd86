"""Snapshot tables -> a validated Snapshot, column by column.

Reading a 100,000-action snapshot through `Snapshot.model_validate` costs
seconds, because every row goes through pydantic's validators one at a time.
Here every check runs on whole columns (pyarrow compute and numpy) and names
the table, row and column of the first bad value; only then are the models
built, without validating again, from plain Python lists. The checks are the
ones `models.snapshot` runs, and tests hold the two paths to the same answers.

Rows count from 0, as in pyarrow and pandas.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any, NoReturn, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ValidationError

from models.arrow.schema import (
    CAP_COLUMNS,
    COLUMNS_SINCE,
    DEVICE_COLUMNS,
    QUANTITY_COLUMNS,
    SNAPSHOT_TABLES,
    SNAPSHOT_VERSION,
    SNAPSHOT_VERSION_KEY,
    TABLES_OF_VERSION,
)
from models.construct import collections_deferred, trusted_models
from models.devices import AcceleratorRequest, parse_device
from models.errors import InvalidInput
from models.limits import (
    EARLIEST,
    LATEST,
    MAX_ACCELERATORS,
    MAX_AMOUNT,
    MAX_CAP,
    MAX_CLUSTER_ROOM,
    MAX_CPU_MILLICORES,
    MAX_DURATION,
    MAX_EXPECTED_DURATION,
    MAX_INSTANCES,
    MAX_NODES,
    MAX_QUEUE_COUNT,
    MAX_QUEUE_PRIORITY,
    MAX_REPLICAS,
)
from models.quantity import CPU, MEMORY, largest_amount, parse_quantity
from models.quota import (
    MAX_PRIORITY,
    MAX_SHARES_PER_JOB_QUEUE,
    Job,
    JobQueue,
    JobState,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
    parse_instance_type,
)
from models.snapshot import (
    DEFAULT_QUEUE,
    Action,
    ActionState,
    Cluster,
    Container,
    ContainerPlacement,
    Environment,
    NodePool,
    NodeShape,
    Placement,
    Queue,
    Scheduling,
    Settings,
    Snapshot,
    cluster_room_message,
)

# The separator of composite keys; a control character is never part of a Kubernetes name,
# label or resource.
_SEP = "\x1f"
_INT64 = pa.int64()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class _Table:
    """One snapshot table whose columns have the schema's types; errors name table, row, column."""

    def __init__(self, source: str, name: str, columns: dict[str, pa.Array]) -> None:
        self.source = source
        self.name = name
        self.columns = columns
        self.rows = len(next(iter(columns.values())))

    def __getitem__(self, column: str) -> pa.Array:
        return self.columns[column]

    def fail(self, row: int, column: str, message: str) -> NoReturn:
        raise InvalidInput(
            f"{self.source}: table {self.name}, row {row}, column {column}: {message}",
            field=f"{self.name}.{column}",
        )

    def check(self, bad: Any, column: str, message: Callable[[int], str]) -> None:
        """Fail at the first row where `bad` (a boolean array; null counts as fine) holds."""
        rows = _holds(bad)
        if len(rows):
            row = int(rows[0])
            self.fail(row, column, message(row))

    def value(self, column: str, row: int) -> Any:
        return self.columns[column][row].as_py()


def _holds(bad: Any) -> np.ndarray:
    """The positions where a boolean array (null counts as false) or mask holds."""
    if isinstance(bad, pa.Array):
        # The usual answer is none: `any` finds it in one pass over the bits, where filling
        # the nulls of a nullable column's test costs ten times as much.
        if not pc.any(bad).as_py():
            return np.zeros(0, np.int64)
        bad = pc.fill_null(bad, False)
    return np.flatnonzero(np.asarray(bad, bool))


def _table_error(source: str, table: str, message: str, column: str | None = None) -> NoReturn:
    where = f"table {table}" if column is None else f"table {table}, column {column}"
    raise InvalidInput(f"{source}: {where}: {message}", field=table)


# --- types --------------------------------------------------------------------------------------


def _is_text(type_: pa.DataType) -> bool:
    if pa.types.is_dictionary(type_):
        return _is_text(type_.value_type)
    return pa.types.is_string(type_) or pa.types.is_large_string(type_)


def _compatible(actual: pa.DataType, expected: pa.DataType, quantity: bool) -> bool:
    """Whether a column of `actual` type can stand for `expected` without losing meaning."""
    if pa.types.is_null(actual):
        return True
    if pa.types.is_string(expected):
        return _is_text(actual)
    if pa.types.is_int64(expected):
        return pa.types.is_integer(actual) or (quantity and _is_text(actual))
    if pa.types.is_timestamp(expected):
        return pa.types.is_timestamp(actual)
    if pa.types.is_duration(expected):
        return pa.types.is_duration(actual)
    if pa.types.is_list(expected):
        is_list = pa.types.is_list(actual) or pa.types.is_large_list(actual)
        return is_list and _compatible(actual.value_type, expected.value_type, quantity)
    if pa.types.is_map(expected):
        return (
            pa.types.is_map(actual)
            and _is_text(actual.key_type)
            and _compatible(actual.item_type, expected.item_type, quantity)
        )
    return actual == expected


def _combine(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        # combine_chunks copies even one chunk, the usual case of a file's column
        array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    else:
        array = column
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array


def _version_of(table: pa.Table) -> str | None:
    version = (table.schema.metadata or {}).get(SNAPSHOT_VERSION_KEY)
    return None if version is None else version.decode(errors="replace")


def _conform(source: str, name: str, table: pa.Table, snapshot_version: str) -> _Table:
    """Check the version and column types of one table; cast it to its schema's exact types."""
    schema = SNAPSHOT_TABLES[name]
    version = _version_of(table)
    if version is None:
        _table_error(source, name, "has no schema version (metadata key sluice.snapshot.version)")
    if version not in TABLES_OF_VERSION:
        _table_error(
            source,
            name,
            f"unknown schema version {version!r};"
            f" this reader knows versions {', '.join(TABLES_OF_VERSION)}",
        )
    if version != snapshot_version:
        _table_error(
            source,
            name,
            f"has schema version {version}, but table settings has {snapshot_version};"
            " a snapshot's tables share one version",
        )
    for column in table.column_names:
        # pandas stores its index as such a column when it writes Parquet
        if column not in schema.names and not column.startswith("__index_level_"):
            _table_error(source, name, "is not a column of this table", column)
    columns: dict[str, pa.Array] = {}
    for field in schema:
        if field.name not in table.column_names:
            if int(COLUMNS_SINCE.get((name, field.name), "0")) > int(version):
                columns[field.name] = pa.nulls(table.num_rows, field.type)
                continue
            _table_error(source, name, "is missing", field.name)
        array = _combine(table.column(field.name))
        quantity = (name, field.name) in QUANTITY_COLUMNS
        if not _compatible(array.type, field.type, quantity):
            _table_error(source, name, f"has type {array.type}, expected {field.type}", field.name)
        columns[field.name] = array
    view = _Table(source, name, columns) if table.num_rows else _empty(source, name)
    for field in schema:
        array = view[field.name]
        if not field.nullable:
            view.check(array.is_null(), field.name, lambda _: "is null")
        view.columns[field.name] = _cast(view, field, array)
    return view


def _empty(source: str, name: str) -> _Table:
    schema = SNAPSHOT_TABLES[name]
    return _Table(source, name, {f.name: pa.array([], f.type) for f in schema})


def _cast(table: _Table, field: pa.Field, array: pa.Array) -> pa.Array:
    key = (table.name, field.name)
    if pa.types.is_map(field.type):
        return _cast_map(table, field, array, amounts=key in QUANTITY_COLUMNS)
    if key in QUANTITY_COLUMNS:
        return _quantities(table, field.name, array, str(QUANTITY_COLUMNS[key]))
    if array.type != field.type:
        # Only unit and string-width changes remain; a timestamp without a zone is UTC.
        array = array.cast(field.type, safe=False)
    if key in DEVICE_COLUMNS:
        array = _devices(table, field.name, array)
    return array


def _quantities(table: _Table, column: str, array: pa.Array, resource: str) -> pa.Array:
    """An integer column as it is, or Kubernetes spellings parsed once per distinct value."""
    if _is_text(array.type):
        array = array.cast(pa.string())
        return _parsed(table, column, array, lambda text: parse_quantity(resource, text, column))
    array = array.cast(pa.int64())
    table.check(pc.less(array, 0), column, lambda row: f"{table.value(column, row)} is negative")
    most = largest_amount(resource)
    table.check(
        pc.greater(array, most),
        column,
        lambda row: f"{table.value(column, row)} is above the limit of {most:,}",
    )
    return array


def _parsed(
    table: _Table,
    column: str,
    array: pa.Array,
    parse: Callable[[str], Any],
    type_: pa.DataType = _INT64,
    row_of: Callable[[int], int] | None = None,
) -> pa.Array:
    """`parse` applied to each distinct value; `row_of` maps an element to its table row."""
    encoded = pc.dictionary_encode(array)  # one hash pass finds the values and each row's
    parsed = []
    for text in encoded.dictionary.to_pylist():
        try:
            parsed.append(parse(text))
        except InvalidInput as error:
            element = pc.index(array, text).as_py()
            row = element if row_of is None else row_of(element)
            table.fail(row, column, error.message.removeprefix(f"{column}: "))
    return pc.take(pa.array(parsed, type_), encoded.indices)


def _devices(
    table: _Table, column: str, array: pa.Array, row_of: Callable[[int], int] | None = None
) -> pa.Array:
    """Any accepted spelling of a device, as its canonical name."""
    return _parsed(
        table, column, array, lambda text: parse_device(text, column).canonical, pa.string(), row_of
    )


def _map_parts(array: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """Offsets from 0, keys and items of a map array (a slice's children are not sliced)."""
    offsets = array.offsets.to_numpy()
    start, stop = int(offsets[0]), int(offsets[-1])
    return (
        offsets - start,
        array.keys.slice(start, stop - start),
        array.items.slice(start, stop - start),
    )


def _cast_map(table: _Table, field: pa.Field, array: pa.Array, amounts: bool) -> pa.Array:
    """Keys trimmed (resources lower-cased, devices canonical), items to the schema's type.

    `amounts`: a map of resource to quantity, whose items may be Kubernetes spellings.
    """
    if pa.types.is_null(array.type):
        return array.cast(field.type)
    offsets, keys, items = _map_parts(array)

    def row_of(entry: int) -> int:
        """The row of a map entry; asked only to name a bad one, so not worked out for all."""
        return int(np.searchsorted(offsets, entry, side="right")) - 1

    keys = pc.utf8_trim_whitespace(keys.cast(pa.string()))
    column = field.name

    def entry_check(bad: pa.Array, message: Callable[[int], str]) -> None:
        entries = _holds(bad)
        if len(entries):
            table.fail(row_of(int(entries[0])), column, message(int(entries[0])))

    entry_check(_empty_texts(keys), lambda _: "has an empty key")
    entry_check(items.is_null(), lambda i: f"{keys[i].as_py()} has a null value")
    if (table.name, column) in DEVICE_COLUMNS:
        keys = _devices(table, column, keys, row_of)
    elif amounts:  # resource names as the models spell them
        keys = pc.utf8_lower(keys)
    caps = (table.name, column) in CAP_COLUMNS
    if amounts and _is_text(items.type):
        pairs = pc.binary_join_element_wise(keys, items.cast(pa.string()), _SEP)
        parse = _parse_cap if caps else _parse_pair
        items = _parsed(table, column, pairs, parse, row_of=row_of)
    else:
        items = items.cast(field.type.item_type)
    if pa.types.is_int64(items.type):
        entry_check(
            pc.less(items, 0), lambda i: f"{keys[i].as_py()}={items[i].as_py()} is negative"
        )
        if caps:
            most = pa.scalar(MAX_CAP)
        else:
            most = pc.if_else(pc.equal(keys, CPU), MAX_CPU_MILLICORES, MAX_AMOUNT)
        entry_check(
            pc.greater(items, most),
            lambda i: (
                f"{keys[i].as_py()}={items[i].as_py()} is above the limit of"
                f" {(most if caps else most[i]).as_py():,}"
            ),
        )
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), keys, items, mask=array.is_null()
    ).cast(field.type)


def _parse_pair(pair: str, most: int | None = None) -> int:
    """`resource<SEP>spelling` -> units; the error names the resource (`cpu: 'x' is not ...`)."""
    resource, _, text = pair.partition(_SEP)
    return parse_quantity(resource, text, resource, most)


def _parse_cap(pair: str) -> int:
    return _parse_pair(pair, MAX_CAP)


# --- rules across rows and tables ---------------------------------------------------------------


def _lookup(values: pa.Array, keys: pa.Array) -> np.ndarray:
    """The index of each value among `keys`; -1 where it is null or absent."""
    return np.asarray(pc.fill_null(pc.index_in(values, value_set=keys), -1), np.int64)


def _codes_and_lookups(keys: pa.Array, *values: pa.Array) -> tuple[np.ndarray, list[np.ndarray]]:
    """The codes of `keys` (as _codes numbers them) and each column of `values` looked up among
    the keys (as _lookup answers), by one hash pass over all of them, where _codes and a
    _lookup per column hash the keys once each and every value once."""
    codes = _codes(pa.concat_arrays([keys, *values]))
    key_codes = codes[: len(keys)]
    # Codes count up in order of first appearance, so the keys' codes are 0..known-1 and a
    # value's code at or above `known` is no key's; a null's -1 reads the last entry too.
    row_of_code = np.append(np.flatnonzero(_first_seen(key_codes)), -1)
    known = len(row_of_code) - 1
    bounds = np.cumsum([len(keys), *map(len, values)]).tolist()
    return key_codes, [row_of_code[np.minimum(codes[a:b], known)] for a, b in pairwise(bounds)]


def _key(*parts: pa.Array) -> pa.Array:
    """A composite key per row (null when a part is null)."""
    return pc.binary_join_element_wise(*parts, _SEP)


def _codes(array: pa.Array) -> np.ndarray:
    """The same integer for equal values of `array`, different for different, counting up from 0
    in order of first appearance (one hash pass); -1 for null."""
    return np.asarray(pc.fill_null(pc.dictionary_encode(array).indices, -1), np.int64)


def _pair_codes(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The codes (as _codes numbers them) of the pairs of two code columns; -1 where either
    is -1."""
    pairs = first * (int(second.max(initial=0)) + 1) + second  # far inside int64
    return _codes(pa.array(pairs, mask=(first < 0) | (second < 0)))


def _first_seen(codes: np.ndarray) -> np.ndarray:
    """Whether each row holds its code (from _codes) for the first time: codes count up in
    order of first appearance, so a new one is above every code of the rows before it."""
    return codes > np.maximum.accumulate(np.concatenate([[-1], codes]))[:-1]


def _run_codes(codes: np.ndarray, bounds: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """The codes (as _codes numbers them) of the rows of a 2-d array of codes, -1 a value like
    any other; given `bounds`, of its runs of rows bounds[i]:bounds[i + 1] instead.

    A row (or run) is read as one binary value over the codes' memory, so that one hash pass
    codes them all, where folding in one column at a time costs a pass per column."""
    codes = np.ascontiguousarray(codes, np.int64)
    width = codes.itemsize * codes.shape[1]
    if bounds is None:
        rows = pa.Array.from_buffers(pa.binary(width), len(codes), [None, pa.py_buffer(codes)])
    else:
        offsets = pa.py_buffer(np.asarray(bounds, np.int64) * width)
        rows = pa.Array.from_buffers(
            pa.large_binary(), len(bounds) - 1, [None, offsets, pa.py_buffer(codes)]
        )
    return _codes(rows)


def _check_unique(table: _Table, column: str, keys: pa.Array | np.ndarray, what: str) -> None:
    """Fail at the first row whose (non-null) key appeared on an earlier row; `keys` is a
    column or its codes (_codes, _pair_codes)."""
    codes = keys if isinstance(keys, np.ndarray) else _codes(keys)
    repeat = (codes >= 0) & ~_first_seen(codes)
    table.check(repeat, column, lambda row: f"{what} {table.value(column, row)!r} appears twice")


def _check_names(table: _Table, column: str) -> None:
    table.check(_empty_texts(table[column]), column, lambda _: "is empty")


def _empty_texts(texts: pa.Array) -> pa.Array:
    """Where a string is empty: its length in bytes, read off the offsets, where utf8_length
    would count its characters."""
    return pc.equal(pc.binary_length(texts), 0)


def _check_range(table: _Table, most: int | None, *columns: str, least: int = 0) -> None:
    """Every value of the integer columns in least..most (None: no upper limit)."""
    for column in columns:

        def below(row: int, column: str = column) -> str:
            value = table.value(column, row)
            return f"{value} is negative" if least == 0 else f"{value} is below {least:,}"

        def above(row: int, column: str = column) -> str:
            return f"{table.value(column, row)} is above the limit of {most:,}"

        table.check(pc.less(table[column], least), column, below)
        if most is not None:
            table.check(pc.greater(table[column], most), column, above)


def _check_durations(table: _Table, *columns: str) -> None:
    """Durations from 0 to models.limits.MAX_DURATION."""
    most = MAX_DURATION // timedelta(microseconds=1)
    for column in columns:
        micros = table[column].cast(_INT64)
        table.check(pc.less(micros, 0), column, lambda _: "is negative")
        table.check(
            pc.greater(micros, most),
            column,
            lambda _: f"is above the limit of {MAX_DURATION.days:,} days",
        )


def _check_expected_durations(table: _Table) -> None:
    """Above zero and at most models.limits.MAX_EXPECTED_DURATION, as models.snapshot.Action."""
    micros = table["expected_duration"].cast(_INT64)
    most = MAX_EXPECTED_DURATION // timedelta(microseconds=1)
    table.check(
        pc.or_(pc.less_equal(micros, 0), pc.greater(micros, most)),
        "expected_duration",
        lambda _: f"is not above 0s and at most {MAX_EXPECTED_DURATION.days} days",
    )


def _check_times(table: _Table, *columns: str) -> None:
    """Times within models.limits.EARLIEST..LATEST."""
    first, last = (int((t - _EPOCH) // timedelta(microseconds=1)) for t in (EARLIEST, LATEST))
    for column in columns:
        micros = table[column].cast(_INT64)
        outside = pc.or_(pc.less(micros, first), pc.greater(micros, last))
        table.check(
            outside,
            column,
            lambda _: f"is outside {EARLIEST.isoformat()} .. {LATEST.isoformat()}",
        )


def _check_reference(table: _Table, column: str, index: np.ndarray, what: str) -> None:
    """Fail where the column is set but `index` (from _lookup) found nothing."""
    unknown = (index < 0) & np.asarray(table[column].is_valid(), bool)
    table.check(unknown, column, lambda row: f"unknown {what} {table.value(column, row)!r}")


def _check_enum(table: _Table, column: str, values: Sequence[str]) -> None:
    table.check(
        pc.invert(pc.is_in(table[column], value_set=pa.array(values))),
        column,
        lambda row: f"{table.value(column, row)!r} is not one of {', '.join(values)}",
    )


def _check_exactly_one_owner(table: _Table) -> None:
    both = pc.and_(table["action"].is_valid(), table["environment"].is_valid())
    table.check(both, "environment", lambda _: "set together with action; give one owner")
    neither = pc.and_(table["action"].is_null(), table["environment"].is_null())
    table.check(neither, "action", lambda _: "is null and so is environment; give one owner")


class _Checked:
    """The tables after every rule; indexes into each other built once.

    `quota` holds the job queues' Snapshot fields, already built (see _quota).
    """

    def __init__(self, tables: dict[str, _Table]) -> None:
        self.settings = tables["settings"]
        self.queues = tables["queues"]
        self.clusters = tables["clusters"]
        self.environments = tables["environments"]
        self.actions = tables["actions"]
        self.containers = tables["containers"]
        self.placements = tables["placements"]
        self._settings()
        self._clusters()
        self._queues()
        self._environments()
        self._actions()
        self._containers()
        self._placements()
        self.quota = _quota(tables) if "jobs" in tables else _Quota()

    def _settings(self) -> None:
        settings = self.settings
        if settings.rows != 1:
            _table_error(settings.source, "settings", f"has {settings.rows} rows, expected one")
        _check_times(settings, "now")

    def _clusters(self) -> None:
        c = self.clusters
        _check_names(c, "cluster")
        _check_names(c, "node_pool")
        pool_rows = np.asarray(c["node_pool"].is_valid(), bool)
        bare = ~pool_rows
        for column in ("node_cpu", "node_memory", "nodes"):
            c.check(pool_rows & np.asarray(c[column].is_null()), column, lambda _: "is null")
        for column in [name for name in c.columns if name not in ("cluster", "node_pool")]:
            c.check(
                bare & np.asarray(c[column].is_valid()),
                column,
                lambda _: "is set on a row without node_pool (a cluster with no node pools)",
            )
        _check_range(c, MAX_ACCELERATORS, "node_accelerators")
        _check_range(c, MAX_NODES, "nodes", "max_nodes")
        c.check(
            pc.less(c["max_nodes"], c["nodes"]),
            "max_nodes",
            lambda row: f"{c.value('max_nodes', row)} is below nodes {c.value('nodes', row)}",
        )
        c.check(
            pc.and_(pc.greater(c["node_accelerators"], 0), c["node_accelerator"].is_null()),
            "node_accelerator",
            lambda _: "is null but node_accelerators is set; say which device",
        )
        self.pool_key = _key(c["cluster"], c["node_pool"])
        _check_unique(c, "node_pool", self.pool_key, "node pool")
        # A row without node_pool stands for a whole cluster, so its name must be alone.
        bare_names = c["cluster"].filter(pa.array(bare))
        alone = pc.and_(pc.is_in(c["cluster"], value_set=bare_names), pa.array(pool_rows))
        c.check(alone, "cluster", lambda row: "has node pools and a row without node_pool")
        self.cluster_names = pc.unique(c["cluster"])
        self.full_scale = pc.max_element_wise(c["nodes"], c["max_nodes"])
        self._cluster_room()

    def _cluster_room(self) -> None:
        """Each cluster's room at full scale within MAX_CLUSTER_ROOM, as Cluster checks it.

        Summed in Python integers, which cannot overflow; a snapshot has few node pools."""
        c = self.clusters
        room: dict[tuple[str, str], int] = {}
        columns = zip(
            c["cluster"].to_pylist(),
            c["node_cpu"].to_pylist(),
            c["node_memory"].to_pylist(),
            c["node_resources"].to_pylist(),
            pc.fill_null(self.full_scale, 0).to_pylist(),
            strict=True,
        )
        for row, (cluster, cpu, memory, resources, nodes) in enumerate(columns):
            for resource, amount in [(CPU, cpu), (MEMORY, memory), *(resources or [])]:
                key = (cluster, resource)
                room[key] = room.get(key, 0) + (amount or 0) * nodes
                if room[key] > MAX_CLUSTER_ROOM:
                    c.fail(row, "cluster", cluster_room_message(cluster, resource))

    def _queues(self) -> None:
        q = self.queues
        _check_names(q, "name")
        _check_unique(q, "name", q["name"], "queue")
        _check_range(q, MAX_QUEUE_COUNT, "run_concurrency", "action_concurrency", "depth")
        _check_range(q, MAX_CAP, "max_gpus")
        _check_range(q, MAX_QUEUE_PRIORITY, "priority", least=-MAX_QUEUE_PRIORITY)
        _check_times(q, "head_blocked_since")
        _check_enum(q, "scheduling", [s.value for s in Scheduling])
        routes = q["clusters"]
        targets = pc.list_flatten(routes)
        unknown = np.flatnonzero(_lookup(targets, self.cluster_names) < 0)
        if len(unknown):
            rows = pc.list_parent_indices(routes).to_numpy()
            name = targets[int(unknown[0])].as_py()
            q.fail(int(rows[unknown[0]]), "clusters", f"routes to unknown cluster {name!r}")

    def _environments(self) -> None:
        e = self.environments
        _check_names(e, "name")
        _check_unique(e, "name", e["name"], "environment")
        _check_reference(e, "queue", _lookup(e["queue"], self.queues["name"]), "queue")
        e.check(pc.less(e["replicas"], 1), "replicas", lambda row: "must be at least 1")
        _check_range(e, MAX_REPLICAS, "replicas")
        e.check(
            pc.and_(e["running"], e["placement_cluster"].is_null()),
            "placement_cluster",
            lambda _: "is null for a running environment",
        )
        _check_reference(
            e, "placement_cluster", _lookup(e["placement_cluster"], self.cluster_names), "cluster"
        )

    def _actions(self) -> None:
        a, env = self.actions, self.environments
        _check_names(a, "id")
        ids, (self.container_action, self.placement_action) = _codes_and_lookups(
            a["id"], self.containers["action"], self.placements["action"]
        )
        _check_unique(a, "id", ids, "action")
        _check_reference(a, "queue", _lookup(a["queue"], self.queues["name"]), "queue")
        _check_enum(a, "state", [s.value for s in ActionState])
        _check_times(a, "submitted_at", "deadline", "started_at")
        _check_durations(a, "max_queued_time", "deadline_after")
        _check_expected_durations(a)
        _check_names(a, "task")
        running = pc.equal(a["state"], ActionState.RUNNING.value)
        a.check(
            pc.and_(pc.invert(running), a["started_at"].is_valid()),
            "started_at",
            lambda _: "is set for a queued action",
        )
        a.check(
            pc.and_(running, pc.and_(a["environment"].is_null(), a["placement_cluster"].is_null())),
            "placement_cluster",
            lambda _: "is null for a running action",
        )
        a.check(
            pc.and_(pc.invert(running), a["placement_cluster"].is_valid()),
            "placement_cluster",
            lambda _: "is set for a queued action",
        )
        _check_reference(
            a, "placement_cluster", _lookup(a["placement_cluster"], self.cluster_names), "cluster"
        )
        action_env = _lookup(a["environment"], env["name"])
        _check_reference(a, "environment", action_env, "environment")
        env_queue = _take(env["queue"], action_env)
        a.check(
            pc.not_equal(env_queue, a["queue"]),
            "environment",
            lambda row: (
                f"environment {a.value('environment', row)} belongs to queue"
                f" {env_queue[row].as_py()}, not {a.value('queue', row)}"
            ),
        )
        a.check(
            pc.and_(running, pc.invert(_take(env["running"], action_env))),
            "environment",
            lambda row: f"runs in environment {a.value('environment', row)}, which is not running",
        )
        a.check(
            pc.and_(a["deadline"].is_valid(), a["deadline_after"].is_valid()),
            "deadline_after",
            lambda _: "is set together with deadline; give one",
        )

    def _containers(self) -> None:
        c, a, e = self.containers, self.actions, self.environments
        _check_exactly_one_owner(c)
        _check_reference(c, "action", self.container_action, "action")
        self.container_env = _lookup(c["environment"], e["name"])
        _check_reference(c, "environment", self.container_env, "environment")
        c.check(
            pc.and_(c["action"].is_valid(), c["name"].is_null()),
            "name",
            lambda _: "is null for an action's container",
        )
        c.check(
            pc.and_(c["environment"].is_valid(), c["name"].is_valid()),
            "name",
            lambda _: "is set for an environment's replica shape (replicas are named replica-N)",
        )
        self.container_names = _codes(c["name"])  # also the build's, to find equal containers
        names = _pair_codes(self.container_action, self.container_names)
        _check_unique(c, "name", names, "container")
        _check_unique(c, "environment", c["environment"], "environment")
        _check_range(c, MAX_ACCELERATORS, "gpu_count")
        c.check(
            pc.and_(c["gpu_device"].is_valid(), c["gpu_count"].is_null()),
            "gpu_count",
            lambda _: "is null but gpu_device is set",
        )
        of_action = self.container_action[self.container_action >= 0]
        self.action_containers = np.bincount(of_action, minlength=a.rows)
        in_env = np.asarray(a["environment"].is_valid(), bool)
        a.check(
            in_env & (self.action_containers > 0),
            "environment",
            lambda row: (
                f"runs in environment {a.value('environment', row)}, so it has no"
                " containers, but table containers has some"
            ),
        )
        a.check(
            ~in_env & (self.action_containers == 0),
            "id",
            lambda _: "has no rows in table containers and no environment",
        )
        shaped = np.zeros(e.rows, bool)
        shaped[self.container_env[self.container_env >= 0]] = True
        e.check(~shaped, "name", lambda _: "has no row in table containers (its replica shape)")

    def _placements(self) -> None:
        p, a, e = self.placements, self.actions, self.environments
        _check_exactly_one_owner(p)
        owner_action = self.placement_action
        _check_reference(p, "action", owner_action, "action")
        owner_env = self.placement_env = _lookup(p["environment"], e["name"])
        _check_reference(p, "environment", owner_env, "environment")
        owner = pc.coalesce(p["action"], p["environment"])
        cluster = pc.coalesce(
            _take(a["placement_cluster"], owner_action), _take(e["placement_cluster"], owner_env)
        )
        owner_column = pc.if_else(p["action"].is_valid(), "action", "environment")
        p.check(
            cluster.is_null(),
            "action",
            lambda row: (
                f"{owner_column[row].as_py()} {owner[row].as_py()} has no placement_cluster"
            ),
        )
        pool = _lookup(_key(cluster, p["node_pool"]), self.pool_key)
        p.check(
            pool < 0,
            "node_pool",
            lambda row: (
                f"unknown node pool {p.value('node_pool', row)!r} of cluster {cluster[row].as_py()}"
            ),
        )
        _check_range(p, None, "node")
        limit = _take(self.full_scale, pool)
        p.check(
            pc.greater_equal(p["node"], limit),
            "node",
            lambda row: (
                f"node {p.value('node', row)} is beyond pool"
                f" {p.value('node_pool', row)}'s {limit[row].as_py()} nodes"
            ),
        )
        _check_unique(p, "container", _key(owner, p["container"]), "container")
        # Each placed container exists, none twice, and the counts match: the sets are equal.
        replicas = e["replicas"].to_pylist()
        names = [
            f"{env}{_SEP}replica-{index}"
            for env, count in zip(e["name"].to_pylist(), replicas, strict=True)
            for index in range(count)
        ]
        # Only the containers of placed actions can match; a line has few.
        c = self.containers
        placed = np.zeros(a.rows + 1, bool)  # the last entry: container_action -1
        placed[owner_action[owner_action >= 0]] = True
        of_placed = pa.array(placed[self.container_action])
        known = pc.is_in(
            _key(owner, p["container"]),
            value_set=pa.concat_arrays(
                [
                    _key(c["action"].filter(of_placed), c["name"].filter(of_placed)),
                    pa.array(names, pa.string()),
                ]
            ),
        )
        p.check(
            pc.invert(known),
            "container",
            lambda row: (
                f"{owner_column[row].as_py()} {owner[row].as_py()} has no container"
                f" {p.value('container', row)!r}"
            ),
        )
        self._placed_counts(a, owner_action, self.action_containers, "containers")
        self._placed_counts(e, owner_env, np.asarray(e["replicas"], np.int64), "replicas")

    def _placed_counts(
        self, owners: _Table, owner: np.ndarray, expected: np.ndarray, what: str
    ) -> None:
        placed = np.bincount(owner[owner >= 0], minlength=owners.rows)
        expected = np.where(np.asarray(owners["placement_cluster"].is_valid(), bool), expected, 0)
        owners.check(
            placed != expected,
            "placement_cluster",
            lambda row: (
                f"table placements lists {int(placed[row])} of its {int(expected[row])} {what}"
            ),
        )


def _take(array: pa.Array, index: np.ndarray) -> pa.Array:
    """array[index] per row; null where the index is -1."""
    return array.take(pa.array(index, pa.int64(), mask=index < 0))


# --- building the models ------------------------------------------------------------------------


def snapshot_from_tables(tables: Mapping[str, pa.Table], source: str = "snapshot") -> Snapshot:
    """Validate the snapshot tables column-wise and build the Snapshot they describe.

    The settings table's version says which tables there are: version 1 has no job
    queues (tables of later versions beside them are ignored), version 2 has them.
    """
    settings = tables.get("settings")
    version = _version_of(settings) if settings is not None else None
    if version not in TABLES_OF_VERSION:
        version = SNAPSHOT_VERSION  # the settings table's own check names the problem
    names = TABLES_OF_VERSION[version]
    for name in names:
        if name not in tables:
            _table_error(source, name, "is missing")
    checked = _Checked({name: _conform(source, name, tables[name], version) for name in names})
    return _build(checked)


def _build(checked: _Checked) -> Snapshot:
    # Building creates a few objects per row and no reference cycles; the cyclic collector
    # would scan the growing heap again and again (it doubles the build time of 100,000
    # actions), so it pauses until the snapshot is built.
    with collections_deferred():
        return _models(checked)


def _models(checked: _Checked) -> Snapshot:
    queues = _queues(checked.queues)
    if DEFAULT_QUEUE not in {queue.name for queue in queues}:
        queues.append(Queue(name=DEFAULT_QUEUE))  # as Snapshot's own validator does
    settings = checked.settings
    return Snapshot.model_construct(
        now=cast(datetime, _times(settings["now"])[0]),  # a required column: never null
        settings=Settings.model_construct(default_gpu_type=settings["default_gpu_type"][0].as_py()),
        queues=queues,
        clusters=_clusters(checked.clusters),
        actions=_actions(checked),
        environments=_environments(checked),
        scheduling_policies=checked.quota.scheduling_policies,
        service_environments=checked.quota.service_environments,
        job_queues=checked.quota.job_queues,
        jobs=checked.quota.jobs,
    )


def _instances(cls: type[M], columns: dict[str, Sequence[Any]]) -> list[M]:
    return trusted_models(cls, columns, "arrow snapshot (update models.arrow.schema)")


def _distinct(array: pa.Array, convert: Callable[[pa.Array], Iterable[T]]) -> list[T | None]:
    """`convert` applied to the array of distinct values (null stays None), each row then
    taking its value's result.

    The whole array at once, so that a conversion made of `map` over C functions makes no
    Python call per value. A column mostly of nulls (a line's unused optional fields) is
    encoded on its other rows only (_with_nulls)."""
    if array.null_count > len(array) // 2:
        return _with_nulls(array, lambda values: _distinct(values, convert))
    encoded = pc.dictionary_encode(array)
    values: list[T | None] = [*convert(encoded.dictionary), None]
    codes = pc.fill_null(encoded.indices, len(values) - 1).to_numpy().tolist()
    return list(map(values.__getitem__, codes))


def _with_nulls(array: pa.Array, convert: Callable[[pa.Array], Iterable[T]]) -> list[T | None]:
    """`convert` applied to the array's values where they are not null, None where they are;
    each converted value is put in its row by a setter mapped in C."""
    if array.null_count == 0:
        return list(convert(array))
    spread: list[T | None] = [None] * len(array)
    if array.null_count < len(array):
        rows = np.flatnonzero(np.asarray(array.is_valid(), bool)).tolist()
        deque(map(spread.__setitem__, rows, convert(array.take(rows))), maxlen=0)
    return spread


def _per_value(convert: Callable[[Any], T]) -> Callable[[pa.Array], Iterator[T]]:
    """A conversion for _distinct: `convert` of each distinct value as Python."""
    return lambda values: map(convert, values.to_pylist())


def _timedeltas(micros: pa.Array) -> list[timedelta]:
    """numpy makes the timedelta objects in C, several times cheaper than timedelta(...)."""
    return cast(list[timedelta], micros.to_numpy().view("timedelta64[us]").tolist())


def _times(array: pa.Array) -> list[datetime | None]:
    """A timestamp column's values as aware datetimes (fromtimestamp, with the microseconds
    put back, costs about twice as much).

    Row by row, not per distinct value as _distinct does: a line's times are mostly distinct
    (submissions), so encoding them cost more than it saved (17 against 12 ms for 102,000
    submission times, 77,000 of them distinct)."""
    return _with_nulls(
        array.cast(pa.int64()), lambda micros: map(_EPOCH.__add__, _timedeltas(micros))
    )


def _durations(array: pa.Array) -> list[timedelta | None]:
    return _distinct(array.cast(pa.int64()), _timedeltas)


def _map_codes(array: pa.Array) -> np.ndarray:
    """The same integer for rows holding the same entries in the same order, different for
    different (as _codes numbers them); a null map counts as an empty one."""
    offsets, keys, items = _map_parts(array)
    # Items are never null (the checks refuse a null value), so integer ones are their own
    # codes for this purpose: equal exactly where the items are.
    item_codes = items.to_numpy() if pa.types.is_int64(items.type) else _codes(items)
    return _run_codes(np.column_stack([_codes(keys), item_codes]), offsets)


def _dicts(array: pa.Array) -> list[dict[str, Any]]:
    """One dict per map row (an empty one for null); each distinct map is built once, then copied.

    Requests repeat a few shapes across many rows, so this is several times cheaper than
    building every row's dict from its entries.
    """
    codes = _map_codes(array)
    pairs = array.take(np.flatnonzero(_first_seen(codes))).to_pylist()
    distinct = [dict(entries or ()) for entries in pairs]
    return list(map(dict.copy, map(distinct.__getitem__, codes.tolist())))


def _gpu_requests(counts: pa.Array, devices: pa.Array) -> list[AcceleratorRequest | None]:
    def request(key: str) -> AcceleratorRequest | None:
        count, _, device = key.partition(_SEP)
        if not int(count):
            return None  # a request of 0 devices is no request, as in models.devices
        return AcceleratorRequest(int(count), parse_device(device, "gpu") if device else None)

    keys = _key(counts.cast(pa.string()), pc.coalesce(devices, ""))
    return _distinct(keys, _per_value(request))


def _runs(owners: np.ndarray, size: int) -> tuple[np.ndarray, list[int]]:
    """The rows of each owner 0..size-1 in row order: owner i's are order[bounds[i]:bounds[i + 1]]
    (`order`, `bounds`); rows whose owner is -1 are left out."""
    rows = np.flatnonzero(owners >= 0)
    owned = owners[rows]
    # A table usually lists each owner's rows together, in owner order: no sort needed then.
    in_order = bool(np.all(owned[1:] >= owned[:-1]))
    order = rows if in_order else rows[np.argsort(owned, kind="stable")]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(owned, minlength=size))])
    return order, bounds.tolist()


def _grouped(owners: np.ndarray, items: Sequence[Any], size: int) -> list[list[Any]]:
    """The items of each owner 0..size-1 in row order; items whose owner is -1 are dropped."""
    order, bounds = _runs(owners, size)
    ordered = [items[row] for row in order.tolist()]
    return [ordered[start:stop] for start, stop in pairwise(bounds)]


def _queues(q: _Table) -> list[Queue]:
    return _instances(
        Queue,
        {
            "name": q["name"].to_pylist(),
            "pool": q["pool"].to_pylist(),
            "run_concurrency": q["run_concurrency"].to_pylist(),
            "action_concurrency": q["action_concurrency"].to_pylist(),
            "depth": q["depth"].to_pylist(),
            "priority": q["priority"].to_pylist(),
            "max_resources": _dicts(q["max_resources"]),
            "max_gpus": q["max_gpus"].to_pylist(),
            "max_accelerators": _dicts(q["max_accelerators"]),
            "scheduling": _distinct(q["scheduling"], _per_value(Scheduling)),
            "clusters": q["clusters"].to_pylist(),
            "head_blocked_since": _times(q["head_blocked_since"]),
        },
    )


def _clusters(c: _Table) -> list[Cluster]:
    names = c["cluster"].to_pylist()
    pooled = np.flatnonzero(np.asarray(c["node_pool"].is_valid(), bool))
    pools = (
        c.columns if len(pooled) == c.rows else {k: v.take(pooled) for k, v in c.columns.items()}
    )
    shapes = _instances(
        NodeShape,
        {
            "cpu": pools["node_cpu"].to_pylist(),
            "memory": pools["node_memory"].to_pylist(),
            "accelerator": pools["node_accelerator"].to_pylist(),
            "accelerators": pc.fill_null(pools["node_accelerators"], 0).to_pylist(),
            "resources": _dicts(pools["node_resources"]),
        },
    )
    node_pools = _instances(
        NodePool,
        {
            "name": pools["node_pool"].to_pylist(),
            "node": shapes,
            "labels": _dicts(pools["labels"]),
            "nodes": pools["nodes"].to_pylist(),
            "max_nodes": pools["max_nodes"].to_pylist(),
        },
    )
    order = list(dict.fromkeys(names))  # clusters in the order they first appear
    index = {name: i for i, name in enumerate(order)}
    owners = np.array([index[names[row]] for row in pooled.tolist()], np.int64)
    return _instances(
        Cluster, {"name": order, "node_pools": _grouped(owners, node_pools, len(order))}
    )


def _placements(t: _Checked, owners: _Table, owner: np.ndarray) -> list[Placement | None]:
    """The placement of every row of `owners` (None where placement_cluster is null);
    `owner` is the owners' row of each row of table placements."""
    p = t.placements
    spots = _instances(
        ContainerPlacement,
        {
            "name": p["container"].to_pylist(),
            "node_pool": p["node_pool"].to_pylist(),
            "node": p["node"].to_pylist(),
        },
    )
    placed = np.flatnonzero(np.asarray(owners["placement_cluster"].is_valid(), bool))
    # Placed owners numbered 0.. in row order, so that only they get a list of spots (the
    # checks made every placements row's owner a placed one); the extra last entry is the
    # number of owner -1, a row of the other owner table.
    rank = np.full(owners.rows + 1, -1, np.int64)
    rank[placed] = np.arange(len(placed))
    made = _instances(
        Placement,
        {
            "cluster": owners["placement_cluster"].take(placed).to_pylist(),
            "containers": _grouped(rank[owner], spots, len(placed)),
        },
    )
    placements: list[Placement | None] = [None] * owners.rows
    for row, placement in zip(placed.tolist(), made, strict=True):
        placements[row] = placement
    return placements


def _container_fields(c: _Table) -> dict[str, list[Any]]:
    return {
        "resources": _dicts(c["resources"]),
        "gpu": _gpu_requests(c["gpu_count"], c["gpu_device"]),
        "node_selector": _dicts(c["node_selector"]),
    }


def _environments(t: _Checked) -> list[Environment]:
    e, c = t.environments, t.containers
    shape_rows = np.flatnonzero(t.container_env >= 0)
    shapes = {k: v.take(shape_rows) for k, v in c.columns.items()}
    owner = t.container_env[shape_rows]
    fields = _container_fields(_Table(c.source, c.name, shapes))
    # Reorder the shapes from container-row order to environment-row order.
    order = np.empty(e.rows, np.int64)
    order[owner] = np.arange(len(owner))
    order_list = order.tolist()
    return _instances(
        Environment,
        {
            "name": e["name"].to_pylist(),
            "queue": e["queue"].to_pylist(),
            "replicas": e["replicas"].to_pylist(),
            "resources": [fields["resources"][i] for i in order_list],
            "gpu": [fields["gpu"][i] for i in order_list],
            "node_selector": [fields["node_selector"][i] for i in order_list],
            "running": e["running"].to_pylist(),
            "placement": _placements(t, e, t.placement_env),
        },
    )


def _container_lists(t: _Checked) -> list[list[Container]]:
    """Each action's containers; rows of equal values share one Container, and actions of equal
    lists of containers share one list.

    A line repeats a few containers and lists of them, and nothing changes a snapshot's models
    or their lists in place (a change is a copy: solver.whatif, solver.explain), so each is
    built once: at 100,000 actions, a few thousand Containers and lists instead of 109,000
    and 102,000."""
    a, c = t.actions, t.containers
    columns = ("name", "resources", "gpu_count", "gpu_device", "node_selector")
    codes = _run_codes(
        np.column_stack(
            [
                t.container_names,
                _map_codes(c["resources"]),
                _codes(c["gpu_count"]),
                _codes(c["gpu_device"]),
                _map_codes(c["node_selector"]),
            ]
        )
    )
    first = np.flatnonzero(_first_seen(codes))
    distinct = _Table(c.source, c.name, {name: c[name].take(first) for name in columns})
    built = _instances(
        Container, {"name": distinct["name"].to_pylist(), **_container_fields(distinct)}
    )
    order, bounds = _runs(t.container_action, a.rows)
    ordered = codes[order]
    lists = _run_codes(ordered[:, np.newaxis], bounds)
    ordered_codes = ordered.tolist()
    shared = [
        list(map(built.__getitem__, ordered_codes[bounds[action] : bounds[action + 1]]))
        for action in np.flatnonzero(_first_seen(lists)).tolist()
    ]
    return list(map(shared.__getitem__, lists.tolist()))


def _actions(t: _Checked) -> list[Action]:
    a = t.actions
    return _instances(
        Action,
        {
            "id": a["id"].to_pylist(),
            "run": _distinct(a["run"], pa.Array.to_pylist),
            "queue": _distinct(a["queue"], pa.Array.to_pylist),
            "submitted_at": _times(a["submitted_at"]),
            "state": _distinct(a["state"], _per_value(ActionState)),
            "placement": _placements(t, a, t.placement_action),
            "containers": _container_lists(t),
            "environment": a["environment"].to_pylist(),
            "max_queued_time": _durations(a["max_queued_time"]),
            "deadline": _deadlines(a),
            "task": a["task"].to_pylist(),
            "expected_duration": _durations(a["expected_duration"]),
            "started_at": _times(a["started_at"]),
        },
    )


def _deadlines(a: _Table) -> list[datetime | timedelta | None]:
    """Each action's deadline: its time, else its duration from submission (few rows have
    either, so only those rows are visited)."""
    deadlines = cast(list[datetime | timedelta | None], _times(a["deadline"]))
    durations = _durations(a["deadline_after"])
    for row in _holds(pc.and_(a["deadline"].is_null(), a["deadline_after"].is_valid())).tolist():
        deadlines[row] = durations[row]
    return deadlines


# --- quota-managed job queues (schema version 2) ------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Quota:
    """The job queues' Snapshot fields (empty for a version-1 snapshot)."""

    scheduling_policies: list[SchedulingPolicy] = dataclasses.field(default_factory=list)
    service_environments: list[ServiceEnvironment] = dataclasses.field(default_factory=list)
    job_queues: list[JobQueue] = dataclasses.field(default_factory=list)
    jobs: list[Job] = dataclasses.field(default_factory=list)


def _quota(tables: dict[str, _Table]) -> _Quota:
    """The job queues' Snapshot fields from their five tables, every rule checked.

    Policies, environments, queues and shares are few (a queue holds at most 20
    shares), so each row is validated by its own model: the rules stay in
    models.quota, and an error still names the table, row and column. Jobs can be
    many, so they are checked column-wise and built without validating again.
    """
    policies_table = tables["scheduling_policies"]
    environments_table = tables["service_environments"]
    for table in (policies_table, environments_table, tables["job_queues"]):
        _check_unique(table, "name", table["name"], _WHAT[table.name])
    policies = _validated_rows(
        policies_table,
        SchedulingPolicy,
        [
            {
                "name": name,
                "quota_share_policy": None
                if strategy is None
                else {"idle_resource_assignment_strategy": strategy},
            }
            for name, strategy in zip(
                policies_table["name"].to_pylist(),
                policies_table["quota_share_policy"].to_pylist(),
                strict=True,
            )
        ],
    )
    environments = _validated_rows(
        environments_table,
        ServiceEnvironment,
        [
            {"name": name, "type": type_, "capacity_limits": limits}
            for name, type_, limits in zip(
                environments_table["name"].to_pylist(),
                environments_table["type"].to_pylist(),
                _capacity_limits(environments_table),
                strict=True,
            )
        ],
    )
    return _Quota(policies, environments, _job_queues(tables), _jobs(tables))


_WHAT = {
    "scheduling_policies": "scheduling policy",
    "service_environments": "service environment",
    "job_queues": "job queue",
}


def _capacity_limits(table: _Table) -> list[dict[str, int]]:
    """Each row's capacity limits as a dict; an instance type given twice in a row fails."""
    limits = []
    for row, pairs in enumerate(table["capacity_limits"].to_pylist()):
        keys = [key for key, _ in pairs]
        repeated = next((key for i, key in enumerate(keys) if key in keys[:i]), None)
        if repeated is not None:
            table.fail(row, "capacity_limits", f"{repeated} is limited twice")
        limits.append(dict(pairs))
    return limits


def _validated_rows(table: _Table, model: type[M], rows: Sequence[dict[str, Any]]) -> list[M]:
    """One model per row, validated; the first problem names its row and column.

    Columns are named as the model's fields; a rule across fields (a model
    validator) names its column through the error's `field`.
    """
    models: list[M] = []
    for row, data in enumerate(rows):
        try:
            models.append(model.model_validate(data))
        except ValidationError as error:
            problem = error.errors()[0]
            cause = problem.get("ctx", {}).get("error")
            field = str(problem["loc"][0]) if problem["loc"] else getattr(cause, "field", None)
            column = field or "name"
            message = str(problem["msg"]).removeprefix("Value error, ")
            table.fail(row, column, message.removeprefix(f"{column}: ").removeprefix(f"{column}."))
    return models


def _job_queues(tables: dict[str, _Table]) -> list[JobQueue]:
    """Job queues with their shares (a queue's shares in row order), references checked."""
    queues, shares = tables["job_queues"], tables["quota_shares"]
    for column, target in (
        ("scheduling_policy", "scheduling_policies"),
        ("service_environment", "service_environments"),
    ):
        index = _lookup(queues[column], tables[target]["name"])
        _check_reference(queues, column, index, _WHAT[target])
    owner = _lookup(shares["job_queue"], queues["name"])
    _check_reference(shares, "job_queue", owner, "job queue")
    _check_unique(shares, "name", _key(shares["job_queue"], shares["name"]), "quota share")
    # The share's rank within its queue: the 21st share of a queue is the first too many.
    rank = np.zeros(shares.rows, np.int64)
    seen = np.zeros(queues.rows, np.int64)
    for row, queue in enumerate(owner.tolist()):
        rank[row] = seen[queue]
        seen[queue] += 1
    shares.check(
        rank >= MAX_SHARES_PER_JOB_QUEUE,
        "job_queue",
        lambda row: (
            f"job queue {shares.value('job_queue', row)} has more than"
            f" {MAX_SHARES_PER_JOB_QUEUE} quota shares"
        ),
    )
    queues.check(
        seen == 0,
        "name",
        lambda _: (
            f"has no rows in table quota_shares; a job queue holds 1 to"
            f" {MAX_SHARES_PER_JOB_QUEUE} quota shares"
        ),
    )
    built_shares = _validated_rows(
        shares,
        QuotaShare,
        [
            {
                "name": name,
                "capacity_limits": limits,
                "strategy": strategy,
                "borrow_limit": borrow_limit,
                "in_share_preemption": preemption,
            }
            for name, limits, strategy, borrow_limit, preemption in zip(
                shares["name"].to_pylist(),
                _capacity_limits(shares),
                shares["strategy"].to_pylist(),
                shares["borrow_limit"].to_pylist(),
                shares["in_share_preemption"].to_pylist(),
                strict=True,
            )
        ],
    )
    grouped = _grouped(owner, built_shares, queues.rows)
    return _validated_rows(
        queues,
        JobQueue,
        [
            {
                "name": name,
                "type": type_,
                "state": state,
                "scheduling_policy": policy,
                "service_environment": environment,
                "quota_shares": queue_shares,
            }
            for name, type_, state, policy, environment, queue_shares in zip(
                queues["name"].to_pylist(),
                queues["type"].to_pylist(),
                queues["state"].to_pylist(),
                queues["scheduling_policy"].to_pylist(),
                queues["service_environment"].to_pylist(),
                grouped,
                strict=True,
            )
        ],
    )


def _jobs(tables: dict[str, _Table]) -> list[Job]:
    """Jobs, checked column-wise as models.quota.Job and check_quota_references check them."""
    j, queues, shares = tables["jobs"], tables["job_queues"], tables["quota_shares"]
    _check_names(j, "id")
    _check_unique(j, "id", j["id"], "job")
    _check_reference(j, "job_queue", _lookup(j["job_queue"], queues["name"]), "job queue")
    share = _lookup(_key(j["job_queue"], j["share"]), _key(shares["job_queue"], shares["name"]))
    j.check(
        share < 0,
        "share",
        lambda row: (
            f"job queue {j.value('job_queue', row)} has no quota share {j.value('share', row)!r}"
        ),
    )
    j.check(
        pc.or_(pc.less(j["priority"], 0), pc.greater(j["priority"], MAX_PRIORITY)),
        "priority",
        lambda row: f"{j.value('priority', row)} is outside 0..{MAX_PRIORITY}",
    )
    j.check(pc.less(j["count"], 1), "count", lambda _: "must be at least 1 instance")
    _check_range(j, MAX_INSTANCES, "count")
    _check_times(j, "submitted_at", "started_at")
    _check_enum(j, "state", [state.value for state in JobState])
    queued = pc.equal(j["state"], JobState.QUEUED.value)
    j.check(
        pc.and_(pc.invert(queued), j["started_at"].is_null()),
        "started_at",
        lambda row: f"is null for a {j.value('state', row)} job",
    )
    j.check(
        pc.and_(queued, j["started_at"].is_valid()),
        "started_at",
        lambda _: "is set for a QUEUED job",
    )
    instance_types = _parsed(
        j,
        "instance_type",
        j["instance_type"],
        lambda text: parse_instance_type(text, "instance_type"),
        pa.string(),
    )
    return _instances(
        Job,
        {
            "id": j["id"].to_pylist(),
            "job_queue": j["job_queue"].to_pylist(),
            "share": j["share"].to_pylist(),
            "priority": j["priority"].to_pylist(),
            "instance_type": instance_types.to_pylist(),
            "count": j["count"].to_pylist(),
            "state": _distinct(j["state"], _per_value(JobState)),
            "submitted_at": _times(j["submitted_at"]),
            "started_at": _times(j["started_at"]),
        },
    )
