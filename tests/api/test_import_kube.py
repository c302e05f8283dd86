"""`sluice import kube FILE`: YAML out, to a file, or put to a running service."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from api.client import FleetConfig
from fixtures import FIXTURES
from models.snapshot import Cluster
from tests.support.service import Service

KUBE = FIXTURES / "kube"


def test_prints_a_scenario_clusters_section() -> None:
    """ "Output: a scenario-file `clusters:` YAML on stdout or `--out`"; the pool whose nodes
    differ is named on stderr and in the file."""
    result = CliRunner().invoke(main, ["import", "kube", str(KUBE / "karpenter-nodes.json")])
    assert result.exit_code == 0, result.stderr
    assert "node pool gpu: its nodes differ in cpu, memory" in result.stderr
    assert result.stdout.startswith("# node pool gpu: its nodes differ")
    (cluster,) = yaml.safe_load(result.stdout)["clusters"]
    assert Cluster.model_validate(cluster).name == "karpenter-nodes"


def test_writes_out_and_names_the_cluster(tmp_path: Path) -> None:
    out = tmp_path / "clusters.yaml"
    args = ["import", "kube", str(KUBE / "gke-nodes.json"), "--name", "east", "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0 and result.stdout == ""
    (cluster,) = yaml.safe_load(out.read_text())["clusters"]
    assert cluster["name"] == "east"
    assert [pool["name"] for pool in cluster["node_pools"]] == [
        "default-pool",
        "t4-pool",
        "a3-pool",
    ]


def test_errors_are_one_line_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "nodes.json"
    bad.write_text('{"kind": "List", "items": [{"metadata": {"name": "n1"}}]}')
    result = CliRunner().invoke(main, ["import", "kube", str(bad)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"INVALID_ARGUMENT: {bad}: node n1: status: Field required")
    result = CliRunner().invoke(main, ["import", "kube", str(bad), "--device", "nope"])
    assert result.stderr == "INVALID_ARGUMENT: --device: 'nope' is not PRODUCT=DEVICE\n"


@pytest.mark.service(cluster=None)
def test_apply_puts_the_cluster(svc: Service) -> None:
    """ "or `--apply --url` to PUT them to a running service through the client"."""
    client = svc.client()
    args = ["import", "kube", str(KUBE / "mig-nodes.json"), "--name", "central", "--apply"]
    result = CliRunner().invoke(main, args, obj=Remote(connection=client))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "cluster central put (2 node pools)\n"
    pools = FleetConfig.get_cluster("central", client=client)["node_pools"]
    assert [pool["node"]["accelerator"] for pool in pools] == [
        "nvidia_gpu/nvidia-a100/1g.5gb",
        "nvidia_gpu/nvidia-a100/3g.20gb",
    ]


@pytest.mark.service(cluster=None)
def test_get_cluster_and_queue_as_json_and_yaml(svc: Service) -> None:
    """ "`-o json|yaml` on every `get`": the same data either way."""
    client = svc.client()
    runner = CliRunner()
    remote = Remote(connection=client)
    args = ["import", "kube", str(KUBE / "eks-nodes.json"), "--name", "east", "--apply"]
    assert runner.invoke(main, args, obj=remote).exit_code == 0
    as_json = runner.invoke(main, ["get", "cluster", "east", "-o", "json"], obj=remote)
    as_yaml = runner.invoke(main, ["get", "cluster", "east", "-o", "yaml"], obj=remote)
    assert json.loads(as_json.stdout) == yaml.safe_load(as_yaml.stdout)
    assert runner.invoke(main, ["create", "queue", "q"], obj=remote).exit_code == 0
    queue = runner.invoke(main, ["get", "queue", "q", "-o", "yaml"], obj=remote)
    assert yaml.safe_load(queue.stdout)["name"] == "q"
