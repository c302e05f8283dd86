"""The limits of models.limits hold on every path into the models: scenario files and Arrow
tables (the HTTP API's are in tests/api/test_limits.py)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

import models.scenario
from fixtures import FIXTURES
from models.arrow.tables import snapshot_from_tables, snapshot_tables
from models.errors import InvalidInput
from models.scenario import load_scenario

EXAMPLE = FIXTURES / "issue-example.yaml"
Tables = dict[str, pa.Table]


def _scenario(tmp_path: Path, change: Any) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    change(data)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("actions", 1, "containers", 0, "resources", "memory"), "8Ei", "limit of 1Pi"),
        (("actions", 1, "containers", 0, "resources", "cpu"), "1e400", "1048576 cores"),
        (("actions", 1, "containers", 0, "resources", "gpu"), "H100:" + "9" * 20, "65,536"),
        (("actions", 1, "max_queued_time"), "99999999999d", "limit of 36500d"),
        (("clusters", 0, "node_pools", 0, "nodes"), 2**40, "100000"),
        (("queues", 0, "depth"), 2**70, "1048576"),
        (("queues", 0, "priority"), 2**70, "1000000"),
        (("queues", 0, "max_gpus"), 2**70, "288230376151711744"),
    ],
)
def test_a_scenario_file_out_of_range_names_the_field_and_the_limit(
    tmp_path: Path, where: tuple[Any, ...], value: Any, message: str
) -> None:
    """Issue: "Bound every quantity, count and integer setting where it is parsed (HTTP, CLI,
    scenario files, Arrow), with limits a real fleet never reaches but the engine can always
    represent; out of range is a 400 `INVALID_ARGUMENT` naming the field and the limit." """

    def change(data: Any) -> None:
        for part in where[:-1]:
            data = data[part]
        data[where[-1]] = value

    with pytest.raises(InvalidInput) as raised:
        load_scenario(_scenario(tmp_path, change))
    named = ".".join(str(part) for part in where[:-1] if part != "resources")
    assert named in raised.value.message and message in raised.value.message


def test_a_deeply_nested_scenario_is_invalid_yaml_with_either_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue: "`sluice solve` on a deeply nested YAML prints `INTERNAL: RecursionError`; an
    overflowing quantity prints `INTERNAL: OverflowError` without a field. Both must be clear
    `INVALID_ARGUMENT` errors." """
    path = tmp_path / "deep.yaml"
    path.write_text("now: 2026-01-01T00:00:00Z\nqueues: " + "[" * 5000 + "]" * 5000 + "\n")
    for loader in {models.scenario._LOADER, yaml.SafeLoader}:
        monkeypatch.setattr(models.scenario, "_LOADER", loader)
        with pytest.raises(InvalidInput, match=r"deep\.yaml: not valid YAML"):
            load_scenario(path)


def test_a_scenario_that_fails_to_load_leaves_the_collector_running(tmp_path: Path) -> None:
    """Issue 12: "`sluice solve` end to end is at most 1.5× the tick it reports on M." A
    scenario is parsed and validated with the cyclic collector deferred (its collections were
    half of the M scenario's YAML load); a file that fails either way leaves it running."""
    assert gc.isenabled()
    broken = tmp_path / "broken.yaml"
    broken.write_text("now: [unclosed\n")
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("now: 2026-01-01T00:00:00Z\nqueues: [{name: q, max_gpus: -1}]\n")
    for path, problem in ((broken, "not valid YAML"), (invalid, "queues.0")):
        with pytest.raises(InvalidInput, match=problem):
            load_scenario(path)
        assert gc.isenabled()


def test_libyaml_reads_scenarios_when_pyyaml_has_it() -> None:
    """Brief: use libyaml's CSafeLoader when available, falling back to SafeLoader."""
    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert models.scenario._LOADER is expected
    assert load_scenario(EXAMPLE).queues[0].name == "research"


# --- Arrow --------------------------------------------------------------------------------------


def _tables() -> Tables:
    return snapshot_tables(load_scenario(EXAMPLE))


def _set(tables: Tables, table: str, column: str, value: Any) -> Tables:
    """Every row of `column` set to `value` (same type)."""
    old = tables[table]
    index = old.schema.get_field_index(column)
    array = pa.array([value] * old.num_rows, old.schema.field(index).type)
    return {**tables, table: old.set_column(index, old.schema.field(index), array)}


def _map_set(tables: Tables, table: str, column: str, key: str, value: int) -> Tables:
    rows = [dict(entries) for entries in tables[table][column].to_pylist()]
    for row in rows:
        row[key] = value
    old = tables[table]
    index = old.schema.get_field_index(column)
    array = pa.array([list(row.items()) for row in rows], old.schema.field(index).type)
    return {**tables, table: old.set_column(index, old.schema.field(index), array)}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda t: _map_set(t, "containers", "resources", "memory", 2**60),
            "table containers, row 0, column resources: memory=1152921504606846976 is above"
            " the limit of 1,125,899,906,842,624",
        ),
        (
            lambda t: _map_set(t, "containers", "resources", "cpu", 2**40),
            "column resources: cpu=1099511627776 is above the limit of 1,048,576,000",
        ),
        (
            lambda t: _set(t, "containers", "gpu_count", 2**40),
            "column gpu_count: 1099511627776 is above the limit of 65,536",
        ),
        (
            lambda t: _set(t, "clusters", "nodes", 2**40),
            "table clusters, row 0, column nodes: 1099511627776 is above the limit of 100,000",
        ),
        (
            lambda t: _set(t, "clusters", "node_cpu", 2**40),
            "column node_cpu: 1099511627776 is above the limit of 1,048,576,000",
        ),
        (
            lambda t: _set(
                _set(_set(t, "clusters", "node_memory", 2**50), "clusters", "max_nodes", 10**5),
                "clusters",
                "nodes",
                10**5,
            ),
            "table clusters, row 0, column cluster: node_pools: cluster east holds more than",
        ),
        (
            lambda t: _set(t, "queues", "depth", 2**62),
            "table queues, row 0, column depth: 4611686018427387904 is above the limit of",
        ),
        (
            lambda t: _set(t, "queues", "priority", -(2**62)),
            "column priority: -4611686018427387904 is below -1,000,000",
        ),
        (
            lambda t: _map_set(t, "queues", "max_accelerators", "nvidia_gpu/nvidia-h100", 2**62),
            "column max_accelerators: nvidia_gpu/nvidia-h100=4611686018427387904 is above",
        ),
        (
            lambda t: _set(t, "environments", "replicas", 2**40),
            "table environments, row 0, column replicas: 1099511627776 is above the limit",
        ),
        (
            lambda t: _set(t, "actions", "max_queued_time", -(10**6)),
            "column max_queued_time: is negative",
        ),
        (
            lambda t: _set(t, "actions", "max_queued_time", 2**62),
            "column max_queued_time: is above the limit of 36,500 days",
        ),
    ],
)
def test_arrow_tables_out_of_range_name_table_row_column_and_limit(
    change: Any, message: str
) -> None:
    """Issue: "Bound every quantity, count and integer setting where it is parsed (HTTP, CLI,
    scenario files, Arrow), with limits a real fleet never reaches but the engine can always
    represent; out of range is a 400 `INVALID_ARGUMENT` naming the field and the limit." """
    with pytest.raises(InvalidInput) as raised:
        snapshot_from_tables(change(_tables()))
    assert message in raised.value.message


@pytest.mark.parametrize(
    "where",
    [("queues", 0, "max_gpus"), ("queues", 0, "depth"), ("clusters", 0, "node_pools", 0, "nodes")],
)
def test_a_scenario_file_with_true_or_false_for_a_number_names_the_field(
    tmp_path: Path, where: tuple[Any, ...]
) -> None:
    """YAML `false` is no number either (pydantic's lax mode read it as 0)."""

    def change(data: Any) -> None:
        for part in where[:-1]:
            data = data[part]
        data[where[-1]] = False

    with pytest.raises(InvalidInput) as raised:
        load_scenario(_scenario(tmp_path, change))
    assert where[-1] in raised.value.message and "true/false" in raised.value.message
