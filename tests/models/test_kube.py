"""Importing `kubectl get nodes -o json` output (issue 17, "Real clusters in")."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fixtures import FIXTURES
from models.errors import InvalidInput
from models.kube import device_of_product, import_cluster
from models.snapshot import Cluster

KUBE = FIXTURES / "kube"


def _nodes(name: str) -> Any:
    return json.loads((KUBE / f"{name}-nodes.json").read_text())


def _pools(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {
        pool.name: {**pool.node.model_dump(mode="json", exclude_defaults=True), "nodes": pool.nodes}
        for pool in cluster.node_pools
    }


def test_gke_pools_by_nodepool_label_with_allocatable_and_devices() -> None:
    """ "allocatable CPU and memory, `nvidia.com/gpu` counts, the GPU product label ... node
    pools grouped by the usual pool labels (GKE `cloud.google.com/gke-nodepool` ...)"."""
    cluster, _ = import_cluster(_nodes("gke"), "east", "gke")
    assert _pools(cluster) == {
        "default-pool": {"cpu": "7910m", "memory": "29251728Ki", "nodes": 2},
        "t4-pool": {
            "cpu": "7910m",
            "memory": "26798440Ki",
            "accelerator": "nvidia_gpu/nvidia-t4",
            "accelerators": 1,
            "nodes": 3,
        },
        "a3-pool": {
            "cpu": "207",
            "memory": "1850020428Ki",
            "accelerator": "nvidia_gpu/nvidia-h100",
            "accelerators": 8,
            "nodes": 1,
        },
    }
    t4 = next(pool for pool in cluster.node_pools if pool.name == "t4-pool")
    assert t4.labels["cloud.google.com/gke-nodepool"] == "t4-pool"
    assert "kubernetes.io/hostname" not in t4.labels


def test_eks_nodegroups() -> None:
    """ "EKS `eks.amazonaws.com/nodegroup`"."""
    cluster, pools = import_cluster(_nodes("eks"), "east", "eks")
    assert _pools(cluster)["a100"] == {
        "cpu": "95690m",
        "memory": "1140962968Ki",
        "accelerator": "nvidia_gpu/nvidia-a100",
        "accelerators": 8,
        "nodes": 2,
    }
    assert set(_pools(cluster)) == {"general", "a100"}
    assert all(not imported.narrowed for imported in pools)


def test_karpenter_nodepool_of_differing_nodes_takes_the_smallest() -> None:
    """ "Karpenter `karpenter.sh/nodepool`"; nodes of one pool with differing shapes: the
    smallest allocatable, and the import says so."""
    cluster, pools = import_cluster(_nodes("karpenter"), "west", "karpenter")
    assert _pools(cluster)["gpu"] == {
        "cpu": "7910m",
        "memory": "30417520Ki",
        "accelerator": "nvidia_gpu/nvidia-a10g",
        "accelerators": 1,
        "nodes": 2,
    }
    assert {imported.pool.name: imported.narrowed for imported in pools} == {
        "gpu": ("cpu", "memory"),
        "default": (),
    }


def test_mig_slices_of_both_strategies() -> None:
    """ "MIG resources": the mixed strategy's `nvidia.com/mig-<profile>` resources and the
    single strategy's slice named in the product label."""
    cluster, _ = import_cluster(_nodes("mig"), "central", "mig")
    pools = _pools(cluster)
    assert pools["a100-mixed"]["accelerator"] == "nvidia_gpu/nvidia-a100/1g.5gb"
    assert pools["a100-mixed"]["accelerators"] == 7
    assert pools["a100-single"]["accelerator"] == "nvidia_gpu/nvidia-a100/3g.20gb"
    assert pools["a100-single"]["accelerators"] == 2


def test_pool_label_given_overrides_the_provider_labels() -> None:
    """ "or one given with `--pool-label`"; a node without the label joins pool `default`."""
    cluster, _ = import_cluster(_nodes("gke"), "east", "gke", "cloud.google.com/machine-family")
    assert {pool.name: pool.nodes for pool in cluster.node_pools} == {
        "e2": 2,
        "n1": 3,
        "default": 1,
    }


@pytest.mark.parametrize(
    ("product", "device"),
    [
        ("NVIDIA-H100-80GB-HBM3", "nvidia_gpu/nvidia-h100"),
        ("NVIDIA-A100-SXM4-80GB", "nvidia_gpu/nvidia-a100-80gb"),
        ("NVIDIA-A100-SXM4-40GB", "nvidia_gpu/nvidia-a100"),
        ("NVIDIA-A100-PCIE-40GB", "nvidia_gpu/nvidia-a100"),
        ("Tesla-T4", "nvidia_gpu/nvidia-t4"),
        ("Tesla-V100-SXM2-16GB", "nvidia_gpu/nvidia-tesla-v100-16gb"),
        ("NVIDIA-L4", "nvidia_gpu/nvidia-l4"),
        ("NVIDIA-L40S", "nvidia_gpu/nvidia-l40s"),
        ("NVIDIA-A10G", "nvidia_gpu/nvidia-a10g"),
        ("NVIDIA-H200", "nvidia_gpu/nvidia-h200"),
        ("nvidia-tesla-t4", "nvidia_gpu/nvidia-t4"),
        ("nvidia-h100-80gb", "nvidia_gpu/nvidia-h100"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "nvidia_gpu/nvidia-a100/1g.5gb"),
    ],
)
def test_gpu_products_map_to_canonical_devices(product: str, device: str) -> None:
    assert device_of_product(product, "label", {}).canonical == device


def test_unknown_product_is_an_error_unless_mapped() -> None:
    """An unknown product is an error naming the node and the label (D95); --device maps it."""
    data = _nodes("eks")
    for node in data["items"]:
        if "nvidia.com/gpu.product" in node["metadata"]["labels"]:
            node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-GeForce-RTX-4090"
    with pytest.raises(InvalidInput) as raised:
        import_cluster(data, "east", "eks")
    assert "node ip-192-168-77-10.ec2.internal" in raised.value.message
    assert "'NVIDIA-GeForce-RTX-4090'" in raised.value.message
    cluster, _ = import_cluster(data, "east", "eks", overrides={"NVIDIA-GeForce-RTX-4090": "L40S"})
    assert _pools(cluster)["a100"]["accelerator"] == "nvidia_gpu/nvidia-l40s"


def _broken(change: Any) -> str:
    data = copy.deepcopy(_nodes("gke"))
    change(data["items"][1])
    with pytest.raises(InvalidInput) as raised:
        import_cluster(data, "east", "gke.json")
    return raised.value.message


def test_bad_nodes_name_the_node_and_the_field() -> None:
    """Validated at the boundary: INVALID_ARGUMENT naming the node and the field."""
    name = "gke-east-default-pool-3f2a9c1e-1x7q"
    message = _broken(lambda node: node["status"]["allocatable"].update(cpu="lots"))
    assert message.startswith(f"gke.json: node {name}: status.allocatable.cpu: 'lots'")
    message = _broken(lambda node: node["status"]["allocatable"].pop("memory"))
    assert message == f"gke.json: node {name}: status.allocatable.memory: missing"
    message = _broken(lambda node: node["metadata"]["labels"].update(big="x" * 64))
    assert message.startswith(f"gke.json: node {name}: metadata.labels.big:")
    message = _broken(lambda node: node.pop("status"))
    assert message.startswith(f"gke.json: node {name}: status: Field required")


def test_a_pool_of_mixed_devices_or_mig_slices_is_refused() -> None:
    """One device type per Sluice node pool (D97)."""
    message = _broken(
        lambda node: node["metadata"]["labels"].update({"cloud.google.com/gke-nodepool": "t4-pool"})
    )
    assert message.startswith("gke.json: node pool t4-pool: its nodes offer different devices")
    mig = _nodes("mig")
    mig["items"][0]["status"]["allocatable"]["nvidia.com/mig-2g.10gb"] = "1"
    with pytest.raises(InvalidInput, match="mixed MIG slices"):
        import_cluster(mig, "central", "mig")


def test_not_a_node_list() -> None:
    with pytest.raises(InvalidInput, match="expected `kubectl get nodes -o json` output"):
        import_cluster({"kind": "PodList"}, "east", "pods.json")
    single, _ = import_cluster(_nodes("eks")["items"][0], "east", "node.json")
    assert [pool.nodes for pool in single.node_pools] == [1]
