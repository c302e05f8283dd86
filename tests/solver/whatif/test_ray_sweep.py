"""Sweeps on Ray: the same results as local worker processes, and a clear error without Ray.

Issue 15: "Run them on Ray when asked (`--executor ray [--address ADDR]`; local processes stay
the default): each variant is a Ray task, the snapshot is put into Ray's object store once,
results stream back with the progress bar."
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from api.cli.main import main
from fixtures import FIXTURES
from models.errors import FailedPrecondition, InvalidInput
from solver import TickOptions
from solver.whatif.compare import apply_changes, load_snapshot
from solver.whatif.executors import LocalExecutor, RayExecutor, import_ray, on_loopback
from solver.whatif.sweep import Sweep, load_variants, sweep

EIGHT_GPU_STRICT = FIXTURES / "seeds" / "eight-gpu-strict.yaml"
QUICK = TickOptions(time_limit_s=1.0)
VARIANTS = """
variants:
  - name: greedy
    set: {queue.team.scheduling: greedy_capacity}
  - name: ten-gpus
    set: {queue.team.max_gpus: 10}
  - name: lose-a100
    drop: [node_pool east/a100]
"""
LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A Ray instance of 2 CPUs on loopback only, shut down (with every process it started)
    after the module's tests."""
    try:
        ray = import_ray(loopback=True)
    except FailedPrecondition:
        pytest.skip("the `ray` extra is not installed (.ci/run installs it)")
    ray.init("local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    session = Path(ray._private.worker._global_node.get_session_dir_path()).name
    try:
        yield ray
    finally:
        ray.shutdown()
        assert not _processes_of(session), "ray.shutdown ends every process of the instance"


def _processes_of(session: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and session in command:
            found.append(command.replace("\0", " "))
    return found


def _variants(tmp_path: Path, text: str = VARIANTS) -> Path:
    path = tmp_path / "variants.yaml"
    path.write_text(text)
    return path


def _without_timings(result: Sweep) -> pa.Table:
    return result.table().drop_columns(["solve_s"])


@pytest.mark.slow
def test_a_sweep_on_ray_equals_the_local_one(local_ray: Any, tmp_path: Path) -> None:
    """ "A test runs a small sweep on a local Ray instance (`ray.init(num_cpus=2)`) and checks
    the results equal the local executor's." """
    listed = load_variants(_variants(tmp_path))
    progress: list[int] = []
    on_ray = sweep(EIGHT_GPU_STRICT, listed, QUICK, RayExecutor(), lambda: progress.append(1))
    local = sweep(EIGHT_GPU_STRICT, listed, QUICK, LocalExecutor(2))
    assert len(progress) == len(listed) + 1, "the baseline and each variant move the bar"
    assert _without_timings(on_ray).equals(_without_timings(local))
    assert on_ray.usage().equals(local.usage())
    for name, comparison in on_ray.comparisons.items():
        other = local.comparisons[name]
        for table, expected in zip(
            comparison.tables().values(), other.tables().values(), strict=True
        ):
            assert table.equals(expected), name
    assert local_ray.is_initialized(), "a Ray instance the sweep did not start stays up"


@pytest.mark.slow
def test_a_bad_variant_on_ray_names_it(local_ray: Any, tmp_path: Path) -> None:
    typo = "  - name: typo\n    set: {queue.tema.depth: 3}\n"
    listed = load_variants(_variants(tmp_path, VARIANTS + typo))
    with pytest.raises(InvalidInput, match=r"^variant typo: queue.tema.depth=3: unknown queue"):
        sweep(EIGHT_GPU_STRICT, listed, QUICK, RayExecutor())


def test_executor_ray_without_the_extra_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets without the extra
    monkeypatch.setenv(LOOPBACK, "0")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["whatif", "sweep", str(EIGHT_GPU_STRICT), str(_variants(tmp_path)), "--out", str(out),
         "--executor", "ray"],
    )  # fmt: skip
    assert (result.exit_code, result.stderr) == (
        1,
        "FAILED_PRECONDITION: --executor ray needs Ray, which is not installed:"
        " pip install -e '.[ray]'\n",
    )
    assert not out.exists()


def test_address_needs_executor_ray(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["whatif", "sweep", str(EIGHT_GPU_STRICT), str(_variants(tmp_path)), "--out",
         str(tmp_path / "out"), "--address", "127.0.0.1:6379"],
    )  # fmt: skip
    assert (result.exit_code, result.stderr) == (
        1,
        "INVALID_ARGUMENT: --address names a Ray cluster: it needs --executor ray\n",
    )


def test_workers_do_not_size_a_ray_cluster(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["whatif", "sweep", str(EIGHT_GPU_STRICT), str(_variants(tmp_path)), "--out",
         str(tmp_path / "out"), "--executor", "ray", "--address", "127.0.0.1:6379",
         "--workers", "4"],
    )  # fmt: skip
    assert (result.exit_code, result.stderr) == (
        1,
        "INVALID_ARGUMENT: --workers does not apply with --address: the Ray cluster's CPUs decide"
        " how many solves run at once\n",
    )


def test_the_measured_variants_file_loads() -> None:
    """The variants of docs/benchmarks.md's sweep measurement stay valid for the snapshot."""
    snapshot = load_snapshot(FIXTURES / "realistic-snapshot")
    variants = load_variants(Path(__file__).with_name("realistic-variants.yaml"))
    assert len(variants) == 20
    for variant in variants:
        apply_changes(snapshot, variant.changes)


@pytest.mark.parametrize(
    ("address", "alone"),
    [
        (None, True),
        ("127.0.0.1:6379", True),
        ("localhost:6379", True),
        ("[::1]:6379", True),
        ("ray://127.0.0.1:10001", True),
        ("10.1.2.3:6379", False),
        ("head.example:6379", False),
    ],
)
def test_a_loopback_address_keeps_ray_on_loopback(address: str | None, alone: bool) -> None:
    """Ray would dial the machine's address for 127.0.0.1 unless told the instance is local."""
    assert on_loopback(address) is alone
