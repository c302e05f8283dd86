"""Snapshots as Arrow tables: lossless round trips, column-wise validation, exact errors.

Issue "Offline what-if solves on Arrow snapshots": "A snapshot is the whole input of one
tick ... as Arrow tables with explicit schemas defined in one module, versioned in the
schema metadata, written as Arrow IPC (and read from Parquet too)."
"""

from __future__ import annotations

import importlib.util
import io
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pydantic import BaseModel

from fixtures import FIXTURES
from models.arrow import schema as arrow_schema
from models.arrow.decode import _instances
from models.arrow.tables import (
    CARRIED,
    read_snapshot,
    read_snapshot_stream,
    read_tables,
    snapshot_from_tables,
    snapshot_tables,
    write_snapshot,
    write_snapshot_stream,
)
from models.errors import InternalError, InvalidInput
from models.quantity import format_quantity
from models.scenario import dump_scenario, load_scenario
from models.snapshot import Container, Snapshot
from tests.support.generate import SMALL, random_snapshot

EXAMPLE = FIXTURES / "issue-example.yaml"
REALISTIC = FIXTURES / "realistic-snapshot"
SCENARIOS = sorted(FIXTURES.glob("**/*.yaml"))

Tables = dict[str, pa.Table]


def realistic_generator() -> Any:
    """fixtures/generators/realistic_snapshot.py, loaded by path (fixtures is not installed)."""
    path = FIXTURES / "generators" / "realistic_snapshot.py"
    spec = importlib.util.spec_from_file_location("realistic_snapshot", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# --- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_to_snapshot_to_scenario_is_lossless(path: Path, tmp_path: Path) -> None:
    """ "Round-trip: scenario to snapshot to scenario is lossless, tested." """
    try:
        scenario = load_scenario(path)
    except InvalidInput:
        pytest.skip(f"{path.name} is not a loadable scenario (a test's bad input)")
    assert set(CARRIED) == set(Snapshot.model_fields)  # a new field needs its table first
    write_snapshot(scenario, tmp_path / "snap")
    back = read_snapshot(tmp_path / "snap")
    assert back == scenario
    assert load_scenario_text(dump_scenario(back), tmp_path) == scenario


def load_scenario_text(text: str, tmp_path: Path) -> Snapshot:
    path = tmp_path / "again.yaml"
    path.write_text(text)
    return load_scenario(path)


# The first few seeds in every run, all 40 in the full one.
@pytest.mark.parametrize(
    "seed", [*range(8), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(8, 40))]
)
def test_random_snapshots_round_trip_through_every_format(seed: int, tmp_path: Path) -> None:
    """Written as Arrow IPC, read from Parquet too, and sent as one stream per table."""
    snapshot = random_snapshot(random.Random(seed), SMALL)
    write_snapshot(snapshot, tmp_path / "ipc")
    write_snapshot(snapshot, tmp_path / "parquet", "parquet")
    stream = io.BytesIO()
    write_snapshot_stream(snapshot, stream)
    (tmp_path / "snap.arrows").write_bytes(stream.getvalue())
    assert read_snapshot(tmp_path / "ipc") == snapshot
    assert read_snapshot(tmp_path / "parquet") == snapshot
    assert read_snapshot_stream(stream.getvalue()) == snapshot
    assert read_snapshot(tmp_path / "snap.arrows") == snapshot


def _typed(value: Any) -> Any:
    """`value` with the type of every value inside it: a model's fields, list items and dict
    items, so that a str where an ActionState belongs, or a list where a dict does, differ."""
    if isinstance(value, BaseModel):
        return type(value), {name: _typed(field) for name, field in value.__dict__.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    return type(value), value


def _tables_of(source: str) -> Tables:
    if source == "example":
        return snapshot_tables(load_scenario(EXAMPLE))
    if source == "realistic":
        return read_tables(REALISTIC)
    return snapshot_tables(
        random_snapshot(random.Random(int(source.removeprefix("random-"))), SMALL)
    )


@pytest.mark.parametrize(
    "source", ["example", "realistic", *(f"random-{seed}" for seed in range(6))]
)
def test_the_column_wise_path_builds_what_pydantic_validation_builds(source: str) -> None:
    """The fast build (no per-row validation; equal values, containers and lists of them
    shared) gives models equal to validated ones, field by field and type by type."""
    snapshot = snapshot_from_tables(_tables_of(source))
    validated = Snapshot.model_validate(snapshot.model_dump())
    assert validated == snapshot
    assert _typed(snapshot) == _typed(validated)


def test_the_committed_realistic_snapshot_is_what_its_generator_writes() -> None:
    """fixtures holds "a realistic snapshot (at least a few thousand actions over several
    queues and clusters) made by a documented generator"."""
    committed = read_snapshot(REALISTIC)
    assert committed == realistic_generator().generate()
    assert len(committed.actions) >= 3000
    assert len({a.queue for a in committed.actions}) >= 5
    assert len(committed.clusters) >= 3


def test_every_table_carries_its_version_and_name() -> None:
    tables = snapshot_tables(load_scenario(EXAMPLE))
    assert list(tables) == list(arrow_schema.SNAPSHOT_TABLES)
    for name, table in tables.items():
        assert table.schema == arrow_schema.SNAPSHOT_TABLES[name]
        assert table.schema.metadata[b"sluice.snapshot.version"] == b"3"
        assert table.schema.metadata[b"sluice.table"] == name.encode()


def test_hand_made_tables_may_spell_quantities_and_devices_as_people_do() -> None:
    """Quantities are int64 in solver units; Kubernetes spellings and device aliases in
    string columns are parsed once per distinct value."""
    snapshot = load_scenario(EXAMPLE)
    tables = snapshot_tables(snapshot)
    spelled = pa.map_(pa.string(), pa.string())
    resources = [
        [(key, format_quantity(key, amount)) for key, amount in row]
        for row in tables["containers"]["resources"].to_pylist()
    ]
    tables = _replace(tables, "containers", "resources", pa.array(resources, spelled))
    devices = ["H100" if d else None for d in tables["containers"]["gpu_device"].to_pylist()]
    devices[-1] = "T4"
    tables = _replace(tables, "containers", "gpu_device", pa.array(devices, pa.string()))
    tables = _replace(tables, "clusters", "node_cpu", pa.array(["96"], pa.string()))
    assert snapshot_from_tables(tables) == snapshot


def test_a_model_field_the_arrow_tables_do_not_carry_is_an_internal_error() -> None:
    with pytest.raises(InternalError, match=r"builds Container from \['name'\]"):
        _instances(Container, {"name": ["main"]})


def test_columns_of_unequal_lengths_are_an_internal_error() -> None:
    columns = {"name": ["main", "sidecar"], "resources": [{}], "gpu": [None], "node_selector": [{}]}
    with pytest.raises(InternalError, match="builds Container from columns of unequal lengths"):
        _instances(Container, columns)


def test_a_fleet_without_actions_or_without_environments_reads_back_as_written() -> None:
    """Placements and containers are grouped by owner; either owner table may be empty."""
    snapshot = load_scenario(EXAMPLE)
    in_environments = {a.id for a in snapshot.actions if a.environment is not None}
    for variant in (
        snapshot.model_copy(update={"actions": []}),
        snapshot.model_copy(
            update={
                "environments": [],
                "actions": [a for a in snapshot.actions if a.id not in in_environments],
            }
        ),
    ):
        assert snapshot_from_tables(snapshot_tables(variant)) == variant


# --- bad input ----------------------------------------------------------------------------------


def _replace(tables: Tables, table: str, column: str, array: pa.Array) -> Tables:
    """`tables` with one column replaced (its field's type follows the array)."""
    old = tables[table]
    index = old.schema.get_field_index(column)
    field = pa.field(column, array.type, nullable=old.schema.field(index).nullable)
    return {**tables, table: old.set_column(index, field, array)}


def _set(tables: Tables, table: str, column: str, row: int, value: Any) -> Tables:
    values = tables[table][column].to_pylist()
    values[row] = value
    return _replace(tables, table, column, pa.array(values, tables[table][column].type))


def _metadata(tables: Tables, table: str, version: bytes | None) -> Tables:
    metadata = dict(tables[table].schema.metadata)
    if version is None:
        del metadata[b"sluice.snapshot.version"]
    else:
        metadata[b"sluice.snapshot.version"] = version
    return {**tables, table: tables[table].replace_schema_metadata(metadata)}


def _without(tables: Tables, table: str) -> Tables:
    return {name: t for name, t in tables.items() if name != table}


def _strings(tables: Tables, table: str, column: str, row: int, value: str) -> Tables:
    """A quantity column written as Kubernetes spellings, with `value` at `row`."""
    values = [str(v) if v is not None else None for v in tables[table][column].to_pylist()]
    values[row] = value
    return _replace(tables, table, column, pa.array(values, pa.string()))


def _spelled_resources(tables: Tables, row: int, resource: str, value: str) -> Tables:
    rows = [
        [(k, str(v)) for k, v in entries]
        for entries in tables["containers"]["resources"].to_pylist()
    ]
    rows[row] = [(k, value if k == resource else v) for k, v in rows[row]]
    array = pa.array(rows, pa.map_(pa.string(), pa.string()))
    return _replace(tables, "containers", "resources", array)


BAD: list[tuple[str, Callable[[Tables], Tables], str]] = [
    ("a missing table", lambda t: _without(t, "queues"), "snapshot: table queues: is missing"),
    (
        "a wrong column type",
        lambda t: _replace(t, "actions", "submitted_at", pa.array(["x", "y", "z"])),
        "snapshot: table actions, column submitted_at: has type string,"
        " expected timestamp[us, tz=UTC]",
    ),
    (
        "a wrong map item type",
        lambda t: _replace(
            t,
            "queues",
            "max_accelerators",
            pa.array([[("H100", 1.5)], []], pa.map_(pa.string(), pa.float64())),
        ),
        "snapshot: table queues, column max_accelerators: has type map<string, double>,"
        " expected map<string, int64>",
    ),
    (
        "an unknown schema version",
        lambda t: _metadata(t, "queues", b"4"),
        "snapshot: table queues: unknown schema version '4'; this reader knows versions 1, 2, 3",
    ),
    (
        "no schema version",
        lambda t: _metadata(t, "actions", None),
        "snapshot: table actions: has no schema version (metadata key sluice.snapshot.version)",
    ),
    (
        "a missing column",
        lambda t: {**t, "actions": t["actions"].drop_columns(["state"])},
        "snapshot: table actions, column state: is missing",
    ),
    (
        "an unknown column",
        lambda t: {**t, "actions": t["actions"].append_column("colour", pa.array(["r"] * 3))},
        "snapshot: table actions, column colour: is not a column of this table",
    ),
    (
        "a quantity that does not parse (map)",
        lambda t: _spelled_resources(t, 1, "memory", "8 gigs"),
        "snapshot: table containers, row 1, column resources: memory: '8 gigs' is not a"
        " Kubernetes quantity (examples: 500m, 2, 64Gi, 1G)",
    ),
    (
        "a quantity that does not parse (scalar)",
        lambda t: _strings(t, "clusters", "node_cpu", 0, "lots"),
        "snapshot: table clusters, row 0, column node_cpu: 'lots' is not a Kubernetes quantity"
        " (examples: 500m, 2, 64Gi, 1G)",
    ),
    (
        "a fraction of a millicore",
        lambda t: _spelled_resources(t, 2, "cpu", "0.5m"),
        "snapshot: table containers, row 2, column resources: cpu: '0.5m' is not a whole"
        " number of millicores",
    ),
    (
        "a map entry without a value",
        lambda t: _set(t, "containers", "resources", 1, [("cpu", 1000), ("memory", None)]),
        "snapshot: table containers, row 1, column resources: memory has a null value",
    ),
    (
        "a negative quantity",
        lambda t: _set(t, "clusters", "node_memory", 0, -1),
        "snapshot: table clusters, row 0, column node_memory: -1 is negative",
    ),
    (
        "an action in an unknown queue",
        lambda t: _set(t, "actions", "queue", 1, "nope"),
        "snapshot: table actions, row 1, column queue: unknown queue 'nope'",
    ),
    (
        "an unknown device",
        lambda t: _set(t, "containers", "gpu_device", 0, "Z80"),
        "snapshot: table containers, row 0, column gpu_device: unknown device 'Z80';"
        " known devices: ",
    ),
    (
        "a null in a required column",
        lambda t: _set(t, "actions", "submitted_at", 2, None),
        "snapshot: table actions, row 2, column submitted_at: is null",
    ),
    (
        "an action id twice",
        lambda t: _set(t, "actions", "id", 2, "train-1"),
        "snapshot: table actions, row 2, column id: action 'train-1' appears twice",
    ),
    (
        "a container name twice in one action",
        lambda t: _set(t, "containers", "action", 1, "train-1"),
        "snapshot: table containers, row 1, column name: container 'main' appears twice",
    ),
    (
        "an unknown state",
        lambda t: _set(t, "actions", "state", 1, "sleeping"),
        "snapshot: table actions, row 1, column state: 'sleeping' is not one of queued, running",
    ),
    (
        "a queue routing to an unknown cluster",
        lambda t: _set(t, "queues", "clusters", 0, ["east", "mars"]),
        "snapshot: table queues, row 0, column clusters: routes to unknown cluster 'mars'",
    ),
    (
        "a scheduling policy that does not exist",
        lambda t: _set(t, "queues", "scheduling", 0, "lottery"),
        "snapshot: table queues, row 0, column scheduling: 'lottery' is not one of strict_fifo,"
        " greedy_capacity",
    ),
    (
        "a container of an unknown action",
        lambda t: _set(t, "containers", "action", 1, "ghost"),
        "snapshot: table containers, row 1, column action: unknown action 'ghost'",
    ),
    (
        "a placement on an unknown node pool",
        lambda t: _set(t, "placements", "node_pool", 0, "a100"),
        "snapshot: table placements, row 0, column node_pool: unknown node pool 'a100' of"
        " cluster east",
    ),
    (
        "a placement beyond full scale",
        lambda t: _set(t, "placements", "node", 0, 6),
        "snapshot: table placements, row 0, column node: node 6 is beyond pool h100's 6 nodes",
    ),
    (
        "a placement of a container the action lacks",
        lambda t: _set(t, "placements", "container", 0, "sidecar"),
        "snapshot: table placements, row 0, column container: action train-1 has no container"
        " 'sidecar'",
    ),
    (
        "a running action without placement",
        lambda t: _set(t, "actions", "placement_cluster", 0, None),
        "snapshot: table actions, row 0, column placement_cluster: is null for a running action",
    ),
    (
        "a placement row of a queued action",
        lambda t: {
            **t,
            "placements": pa.concat_tables(
                [
                    t["placements"],
                    t["placements"]
                    .slice(0, 1)
                    .set_column(0, t["placements"].schema.field("action"), pa.array(["eval-2"])),
                ]
            ),
        },
        "snapshot: table placements, row 1, column action: action eval-2 has no placement_cluster",
    ),
    (
        "a queued action with a placement",
        lambda t: _set(t, "actions", "placement_cluster", 1, "east"),
        "snapshot: table actions, row 1, column placement_cluster: is set for a queued action",
    ),
    (
        "max_nodes below nodes",
        lambda t: _set(t, "clusters", "max_nodes", 0, 1),
        "snapshot: table clusters, row 0, column max_nodes: 1 is below nodes 2",
    ),
    (
        "an action of another queue's environment",
        lambda t: _set(t, "environments", "queue", 0, "default"),
        "snapshot: table actions, row 2, column environment: environment embedder belongs to"
        " queue default, not research",
    ),
    (
        "two settings rows",
        lambda t: {**t, "settings": pa.concat_tables([t["settings"], t["settings"]])},
        "snapshot: table settings: has 2 rows, expected one",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "message"), BAD, ids=[case for case, *_ in BAD])
def test_bad_input_names_table_row_and_column(
    case: str, mutate: Callable[[Tables], Tables], message: str
) -> None:
    """ "A snapshot with a missing table, a wrong column type, an unknown schema version, a
    quantity that does not parse, or an action in an unknown queue fails with a message
    naming the table, row and column." """
    tables = mutate(snapshot_tables(load_scenario(EXAMPLE)))
    with pytest.raises(InvalidInput) as error:
        snapshot_from_tables(tables)
    assert error.value.message.startswith(message), case


def test_a_missing_table_file_is_named_with_the_directory(tmp_path: Path) -> None:
    write_snapshot(load_scenario(EXAMPLE), tmp_path)
    (tmp_path / "placements.arrow").unlink()
    with pytest.raises(InvalidInput, match=rf"^{tmp_path}: table placements: is missing$"):
        read_snapshot(tmp_path)


def test_a_file_that_is_not_arrow_is_named(tmp_path: Path) -> None:
    write_snapshot(load_scenario(EXAMPLE), tmp_path)
    (tmp_path / "queues.arrow").write_text("name,pool\n")
    with pytest.raises(InvalidInput, match=r"queues\.arrow: not a readable Arrow IPC file: "):
        read_tables(tmp_path)
