"""What-if solves: changes, comparisons, Arrow results, the CLI, sweeps and exports.

Issue "Offline what-if solves on Arrow snapshots": "`sluice whatif SNAPSHOT --set
queue.research.max_accelerators.H100=64 --set queue.inference-eval.scheduling=strict_fifo
--drop cluster east --out DIR`: apply the changes, solve the baseline and the variant, write
both results as Arrow tables ..., and print the difference"
"""

from __future__ import annotations

import http.server
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from api.cli.main import main
from fixtures import FIXTURES
from models.arrow import schema as arrow_schema
from models.arrow.tables import read_snapshot, write_snapshot_stream
from models.errors import InvalidInput
from models.scenario import load_scenario
from models.snapshot import ActionState, Scheduling
from solver import TickOptions
from solver.whatif.compare import Comparison, apply_changes, compare, with_queue
from solver.whatif.executors import LocalExecutor
from solver.whatif.sweep import load_variants, sweep

EXAMPLE = FIXTURES / "issue-example.yaml"
EIGHT_GPU_STRICT = FIXTURES / "seeds" / "eight-gpu-strict.yaml"
REALISTIC = FIXTURES / "realistic-snapshot"
QUICK = TickOptions(time_limit_s=1.0)


def arrow(path: Path) -> pa.Table:
    """A result file read back with plain pyarrow."""
    with pa.memory_map(str(path)) as source:
        return ipc.open_file(source).read_all()


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), obj=None, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# --- changes --------------------------------------------------------------------------------------


def test_changes_are_applied_to_a_copy() -> None:
    base = load_scenario(EXAMPLE)
    variant = apply_changes(
        base,
        [
            "queue.research.max_accelerators.H100=64",
            "queue.research.scheduling=strict_fifo",
            "queue.research.max_resources.cpu=600",
            "queue.research.max_gpus=null",
            "queue.research.clusters=null",
            "cluster.east.h100.max_nodes=12",
            "settings.default_gpu_type=T4",
        ],
    )
    research = variant.queue("research")
    assert research.max_accelerators == {"nvidia_gpu/nvidia-h100": 64}
    assert research.scheduling is Scheduling.STRICT_FIFO
    assert research.max_resources["cpu"] == 600_000
    assert research.max_gpus is None
    assert research.clusters is None
    assert variant.clusters[0].node_pools[0].max_nodes == 12
    assert variant.settings.default_gpu_type == "nvidia_gpu/nvidia-t4"
    assert base == load_scenario(EXAMPLE), "the baseline is never changed"
    assert variant.actions is not base.actions, "shared parts are not mutated either"


def test_losing_a_cluster_queues_again_what_ran_there() -> None:
    """Choice: "lose the east cluster" requeues its running actions at their arrival place."""
    base = load_scenario(EXAMPLE)
    variant = apply_changes(base, ["drop cluster east"])
    assert variant.clusters == []
    assert variant.queue("research").clusters == []
    train = variant.actions[0]
    assert (train.id, train.state, train.placement) == ("train-1", ActionState.QUEUED, None)
    assert base.actions[0].state is ActionState.RUNNING


def test_losing_a_node_pool_keeps_the_cluster() -> None:
    variant = apply_changes(load_scenario(EXAMPLE), ["drop node_pool east/h100"])
    assert [c.name for c in variant.clusters] == ["east"]
    assert variant.clusters[0].node_pools == []
    assert variant.actions[0].state is ActionState.QUEUED


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("queue.nope.max_gpus=3", "queue.nope.max_gpus=3: unknown queue 'nope'"),
        ("queue.research.colour=3", "research.colour=3: name a queue field after the queue"),
        ("queue.research.max_gpus=-1", "queue research: max_gpus: Input should be greater than"),
        ("queue.research.max_gpus.x=1", "max_gpus is not a map"),
        ("queue.research.max_accelerators=3", "max_accelerators is a map"),
        ("queue.research.max_accelerators.Z80=3", "unknown device 'Z80'"),
        ("queue.research.max_resources.cpu=lots", "'lots' is not a Kubernetes quantity"),
        ("queue.research.clusters=mars", "queue research: routes to unknown cluster 'mars'"),
        ("queue.ghost.pool=x", "queue.ghost.pool=x: unknown queue 'ghost'"),
        ("cluster.east.h200.nodes=3", "cluster east has no node pool 'h200'"),
        ("cluster.east.h100.max_nodes=1", "max_nodes 1 is below nodes 2"),
        ("drop cluster west", "drop cluster west: no cluster 'west' (clusters: east)"),
        ("drop node_pool east", "cluster east has no node pool ''"),
        ("queues.research.depth=1", "a change starts with queue., cluster. or settings."),
        ("queue.research.depth", "expected PATH=VALUE or `drop KIND NAME`"),
    ],
)
def test_a_bad_change_names_itself(change: str, message: str) -> None:
    with pytest.raises(InvalidInput) as error:
        apply_changes(load_scenario(EXAMPLE), [change])
    assert message in error.value.message


# --- comparing ------------------------------------------------------------------------------------


def test_switching_to_greedy_runs_evaluate_and_embed_and_unblocks_the_head() -> None:
    """Seed (8-GPU example): "Under greedy_capacity the queue runs evaluate and embed at once
    (8 of 8)"; under strict FIFO "the queue stays at 6 of 8"."""
    base = load_scenario(EIGHT_GPU_STRICT)
    greedy = with_queue(
        base, base.queue("team").model_copy(update={"scheduling": Scheduling.GREEDY_CAPACITY})
    )
    comparison = compare(base, greedy, QUICK, ["queue.team.scheduling=greedy_capacity"])
    assert comparison.actions.select(["action", "before", "after"]).to_pylist() == [
        {"action": "evaluate", "before": "waiting", "after": "scheduled"},
        {"action": "embed", "before": "waiting", "after": "scheduled"},
    ]
    gpu = comparison.usage.filter(
        pa.compute.and_(
            pa.compute.equal(comparison.usage["queue"], "team"),
            pa.compute.equal(comparison.usage["resource"], "gpu"),
        )
    ).to_pylist()
    assert gpu == [
        {
            "queue": "team",
            "kind": "accelerator",
            "resource": "gpu",
            "used_before": 6,
            "used_after": 8,
            "cap_before": 8,
            "cap_after": 8,
            "changed": True,
        }
    ]
    heads = comparison.heads.filter(pa.compute.equal(comparison.heads["queue"], "team"))
    assert heads.to_pylist()[0]["change"] == "unblocked"
    assert comparison.counts() == {
        "newly_scheduled": 2,
        "newly_waiting": 0,
        "newly_failed": 0,
        "heads_blocked": 0,
        "heads_unblocked": 1,
    }
    summary = comparison.summary()
    assert "evaluate [team]: waiting (blocked_behind_head) -> scheduled (east)" in summary
    assert "team: head unblocked (train)" in summary


def test_results_are_plain_arrow_read_back_with_pyarrow(tmp_path: Path) -> None:
    """ "Results are plain Arrow: a test reads them back with pyarrow and checks them." """
    base = load_scenario(EIGHT_GPU_STRICT)
    variant = apply_changes(base, ["queue.team.scheduling=greedy_capacity"])
    compare(base, variant, QUICK).write(tmp_path)
    for side in ("baseline", "variant"):
        for name, schema in arrow_schema.RESULT_TABLES.items():
            assert arrow(tmp_path / side / f"{name}.arrow").schema == schema
    scheduled = arrow(tmp_path / "variant" / "scheduled.arrow").to_pylist()
    assert [(r["action"], r["cluster"], r["node_pool"], r["node"]) for r in scheduled] == [
        ("evaluate", "east", "a100", 0),
        ("embed", "east", "a100", 0),
    ]
    waiting = arrow(tmp_path / "baseline" / "waiting.arrow").to_pylist()
    assert [(r["action"], r["reason"], r["resource"]) for r in waiting] == [
        ("train", "queue_cap", "gpu"),
        ("evaluate", "blocked_behind_head", None),
        ("embed", "blocked_behind_head", None),
    ]
    usage = arrow(tmp_path / "baseline" / "usage.arrow")
    memory = usage.filter(pa.compute.equal(usage["resource"], "memory")).to_pylist()
    assert memory == [
        {"queue": "team", "kind": "resource", "resource": "memory", "used": 96 * 2**30, "cap": None}
    ]
    for name, schema in arrow_schema.COMPARISON_TABLES.items():
        assert arrow(tmp_path / f"{name}.arrow").schema == schema
    assert "1 newly scheduled" not in (tmp_path / "summary.txt").read_text()
    assert "2 newly scheduled" in (tmp_path / "summary.txt").read_text()


@pytest.mark.slow
def test_the_python_example_of_the_docs_runs() -> None:
    """ "The same from Python: load a snapshot, change it with ordinary model operations,
    solve, compare." (the five lines in docs/whatif.md, "From Python")"""
    base = read_snapshot(REALISTIC)
    variant = with_queue(base, base.queue("research").model_copy(update={"max_gpus": 32}))
    summary = compare(base, variant, QUICK).summary()
    assert summary.startswith("changes: (none)\nbaseline: ")
    assert "research" in summary


def test_comparing_a_snapshot_with_itself_changes_nothing() -> None:
    comparison: Comparison = compare(*[load_scenario(EXAMPLE)] * 2, options=QUICK)
    assert comparison.actions.num_rows == 0
    assert "usage per cap: unchanged" in comparison.summary()


# --- the CLI --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_whatif_on_the_realistic_fixture(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, _ = invoke(
        "whatif", str(REALISTIC),
        "--set", "queue.research.max_accelerators.H100=64",
        "--set", "queue.inference-eval.scheduling=strict_fifo",
        "--drop", "cluster", "east",
        "--out", str(out), "--time-limit", "1",
    )  # fmt: skip
    assert code == 0, stdout
    assert stdout.startswith(
        "changes: queue.research.max_accelerators.H100=64;"
        " queue.inference-eval.scheduling=strict_fifo; drop cluster east\n"
    )
    assert "newly failed: research" in stdout  # research's H100 work has nowhere to go
    assert sorted(p.name for p in out.iterdir()) == [
        "action_changes.arrow",
        "baseline",
        "head_changes.arrow",
        "summary.txt",
        "usage_changes.arrow",
        "variant",
    ]
    changes = arrow(out / "action_changes.arrow")
    lost = changes.filter(pa.compute.equal(changes["before_detail"], "east"))
    assert lost.num_rows > 0 and set(lost["before"].to_pylist()) <= {"running", "scheduled"}
    caps = arrow(out / "usage_changes.arrow").to_pylist()
    h100 = next(
        r for r in caps if (r["queue"], r["resource"]) == ("research", "nvidia_gpu/nvidia-h100")
    )
    assert (h100["cap_before"], h100["cap_after"]) == (48, 64)


def test_nothing_is_written_to_out_when_a_change_is_bad(tmp_path: Path) -> None:
    """ "Nothing is written to --out on failure." """
    out = tmp_path / "out"
    code, _, stderr = invoke(
        "whatif", str(EXAMPLE), "--set", "queue.research.max_gpus=lots", "--out", str(out)
    )
    assert code == 1
    assert stderr.startswith("INVALID_ARGUMENT: queue.research.max_gpus=lots: queue research:")
    assert list(tmp_path.iterdir()) == []


def test_nothing_is_written_to_out_when_writing_fails_half_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def half(self: Comparison, directory: Path, fmt: str) -> None:
        directory.mkdir()
        (directory / "summary.txt").write_text("partial")
        raise InvalidInput("disk full")

    monkeypatch.setattr(Comparison, "write", half)
    code, _, stderr = invoke(
        "whatif", str(EXAMPLE), "--drop", "cluster", "east", "--out", str(tmp_path / "out")
    )
    assert (code, stderr) == (1, "INVALID_ARGUMENT: disk full\n")
    assert list(tmp_path.iterdir()) == [], "neither --out nor its staging directory remains"


def test_an_existing_out_is_refused_before_any_solve(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    code, _, stderr = invoke(
        "whatif", str(EXAMPLE), "--drop", "cluster", "east", "--out", str(tmp_path)
    )
    assert code == 1
    assert (
        stderr
        == f"INVALID_ARGUMENT: {tmp_path}: already exists; give a new path or an empty directory\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_a_bad_snapshot_names_table_row_and_column_on_the_command_line(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    invoke("snapshot", "export", "--from-scenario", str(EXAMPLE), "--out", str(snap))
    (snap / "queues.arrow").unlink()
    code, _, stderr = invoke(
        "whatif", str(snap), "--drop", "cluster", "east", "--out", str(tmp_path / "o")
    )
    assert (code, stderr) == (1, f"INVALID_ARGUMENT: {snap}: table queues: is missing\n")
    assert not (tmp_path / "o").exists()


# --- sweeps ---------------------------------------------------------------------------------------

VARIANTS = """
variants:
  - name: greedy
    set: {queue.team.scheduling: greedy_capacity}
  - name: ten-gpus
    set: {queue.team.max_gpus: 10}
  - name: lose-a100
    drop: [node_pool east/a100]
"""


@pytest.mark.slow
def test_a_sweep_solves_variants_in_worker_processes(tmp_path: Path) -> None:
    """ "A sweep: one file listing many variants of one snapshot, solved in parallel worker
    processes, with a progress bar, producing one comparison table (Arrow and a readable
    summary)." """
    variants = tmp_path / "variants.yaml"
    variants.write_text(VARIANTS)
    out = tmp_path / "out"
    code, stdout, stderr = invoke(
        "whatif", "sweep", str(EIGHT_GPU_STRICT), str(variants), "--out", str(out),
        "--workers", "2", "--time-limit", "1",
    )  # fmt: skip
    assert code == 0, stderr
    assert stderr.startswith("solving")  # click's progress bar (just its label without a tty)
    table = arrow(out / "sweep.arrow")
    assert table.schema == arrow_schema.SWEEP
    rows = {r["variant"]: r for r in table.to_pylist()}
    assert list(rows) == ["baseline", "greedy", "ten-gpus", "lose-a100"]
    assert (rows["greedy"]["newly_scheduled"], rows["greedy"]["heads_unblocked"]) == (2, 1)
    assert rows["ten-gpus"]["newly_scheduled"] == 1  # train: 6 + 4 = 10; evaluate would be 11
    assert rows["lose-a100"]["scheduled"] == 0
    assert stdout.splitlines()[0].split()[:4] == ["variant", "sched", "wait", "fail"]
    usage = arrow(out / "sweep_usage.arrow")
    assert set(usage["variant"].to_pylist()) == set(rows)
    assert (
        (out / "variants" / "greedy" / "summary.txt")
        .read_text()
        .startswith("changes: queue.team.scheduling=greedy_capacity\n")
    )


def test_a_sweep_with_a_bad_variant_names_it_and_writes_nothing(tmp_path: Path) -> None:
    variants = tmp_path / "variants.yaml"
    variants.write_text(VARIANTS + "  - name: typo\n    set: {queue.tema.depth: 3}\n")
    ticks: list[int] = []
    with pytest.raises(InvalidInput, match=r"^variant typo: queue.tema.depth=3: unknown queue"):
        listed = load_variants(variants)
        sweep(EIGHT_GPU_STRICT, listed, QUICK, LocalExecutor(1), lambda: ticks.append(1))
    assert len(ticks) < 5, "the sweep stops at the bad variant (baseline + 4 variants)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("variants: []", "expected `variants:`, a list of {name, set, drop}"),
        ("variants:\n  - name: a b\n", "variants.0: name 'a b' must be letters"),
        ("variants:\n  - name: x\n  - name: x\n", "variants.1: variant 'x' appears twice"),
        ("variants:\n  - name: x\n    drop: [east]\n", "each drop is `KIND NAME`"),
        ("variants:\n  - name: baseline\n", "(and not 'baseline')"),
    ],
)
def test_a_bad_variants_file_names_the_variant(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInput) as error:
        load_variants(path)
    assert message in error.value.message


# --- export ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["arrow", "parquet", "stream"])
def test_export_from_a_scenario(tmp_path: Path, fmt: str) -> None:
    """ "Produce one ... from a scenario file (fixtures/*.yaml)" """
    out = tmp_path / "snap"
    code, stdout, _ = invoke(
        "snapshot", "export", "--from-scenario", str(EXAMPLE), "--out", str(out), "--format", fmt
    )
    assert code == 0
    assert stdout == f"wrote {out}: 3 actions, 2 queues, 1 clusters\n"
    assert read_snapshot(out) == load_scenario(EXAMPLE)


@pytest.fixture
def server() -> Iterator[str]:
    """A stand-in for the service's `GET /snapshot` (the service itself is another module)."""
    body = io.BytesIO()
    write_snapshot_stream(load_scenario(EXAMPLE), body)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/snapshot" and self.headers["Authorization"] == "Bearer t0k":
                status, kind, data = 200, "application/vnd.apache.arrow.stream", body.getvalue()
            else:
                status, kind = 401, "application/json"
                data = b'{"code": "UNAUTHENTICATED", "message": "bad token"}'
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for the loop to poll, every 0.5 s by default: half a second per test.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_export_from_a_server(tmp_path: Path, server: str) -> None:
    out = tmp_path / "snap"
    code, _, stderr = invoke(
        "snapshot", "export", "--from-server", server, "--token", "t0k", "--out", str(out)
    )
    assert code == 0, stderr
    assert read_snapshot(out) == load_scenario(EXAMPLE)


def test_export_from_a_server_that_refuses(tmp_path: Path, server: str) -> None:
    out = tmp_path / "snap"
    code, _, stderr = invoke(
        "snapshot", "export", "--from-server", server, "--token", "wrong", "--out", str(out)
    )
    assert (code, stderr) == (1, f"UNAUTHENTICATED: {server}/snapshot: bad token\n")
    assert not out.exists()


def test_export_needs_exactly_one_source(tmp_path: Path) -> None:
    code, _, stderr = invoke("snapshot", "export", "--out", str(tmp_path / "x"))
    assert (code, stderr) == (
        1,
        "INVALID_ARGUMENT: give exactly one of --from-scenario FILE and --from-server URL\n",
    )


def test_a_requeued_action_keeps_its_deadline_and_arrival() -> None:
    """Requeued work is the same action: only state and placement change."""
    base = load_scenario(EXAMPLE)
    train = apply_changes(base, ["drop cluster east"]).actions[0]
    assert train.submitted_at == base.actions[0].submitted_at
    assert train.max_queued_time == base.actions[0].max_queued_time
    assert train.deadline_at() == base.actions[0].deadline_at()


def test_whatif_writes_parquet_with_dictionary_encoded_columns(tmp_path: Path) -> None:
    """ "`sluice whatif` and sweeps can write Parquet (`--format parquet`); enum-like columns
    dictionary-encoded" (D98: Parquet's dictionary pages; the Arrow types stay plain)."""
    out = tmp_path / "out"
    code, _, stderr = invoke(
        "whatif", "run", str(EIGHT_GPU_STRICT), "--set", "queue.team.scheduling=greedy_capacity",
        "--out", str(out), "--format", "parquet", "--time-limit", "1",
    )  # fmt: skip
    assert code == 0, stderr
    assert not list(out.rglob("*.arrow"))
    for side in ("baseline", "variant"):
        for name, schema in arrow_schema.RESULT_TABLES.items():
            assert pq.read_table(out / side / f"{name}.parquet").schema == schema
    for name, schema in arrow_schema.COMPARISON_TABLES.items():
        assert pq.read_table(out / f"{name}.parquet").schema == schema
    waiting = pq.ParquetFile(out / "baseline" / "waiting.parquet")
    reason = waiting.schema_arrow.get_field_index("reason")
    assert "RLE_DICTIONARY" in waiting.metadata.row_group(0).column(reason).encodings
    assert waiting.read()["reason"][0].as_py() == "queue_cap"


@pytest.mark.slow
def test_a_sweep_writes_parquet(tmp_path: Path) -> None:
    variants = tmp_path / "variants.yaml"
    variants.write_text(VARIANTS)
    out = tmp_path / "out"
    code, _, stderr = invoke(
        "whatif", "sweep", str(EIGHT_GPU_STRICT), str(variants), "--out", str(out),
        "--workers", "1", "--time-limit", "1", "--format", "parquet",
    )  # fmt: skip
    assert code == 0, stderr
    assert pq.read_table(out / "sweep.parquet").schema == arrow_schema.SWEEP
    assert pq.read_table(out / "sweep_usage.parquet").schema == arrow_schema.SWEEP_USAGE
    assert (out / "variants" / "greedy" / "scheduled.parquet").exists()
