"""Kubernetes nodes in, Sluice clusters out: the part of `kubectl get nodes -o json` Sluice reads.

Only a node's name, labels and `status.allocatable` are read; everything else a real
node carries is ignored. Nodes group into node pools by the provider's pool label
(GKE, EKS, Karpenter, or one the user names); a pool's shape is the smallest
allocatable of its nodes, so a placement never assumes room one of them lacks
(docs/decisions.md D95-D97).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from models.devices import Device, parse_device
from models.errors import InvalidInput
from models.limits import MAX_ACCELERATORS, MAX_NODES
from models.quantity import CPU, MEMORY, format_quantity, parse_quantity
from models.scenario import validation_message
from models.snapshot import DEFAULT_POOL, Cluster, NodePool

POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
)
"""The labels that name a node's pool, looked for in this order."""
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
MIG_PREFIX = "nvidia.com/mig-"
# Kubernetes bounds: a name is a DNS subdomain, a label key a prefix/name, a value 63 characters.
_MAX_NAME = 253
_MAX_LABEL_KEY = 317
_MAX_LABEL_VALUE = 63
# A pool's nodes come and go; a label naming one of them is no label of the pool.
_PER_NODE_LABELS = {"kubernetes.io/hostname"}
_MAX_ENTRIES = 512  # labels or allocatable resources on one node; real nodes have a few dozen
LabelKey = Annotated[str, StringConstraints(max_length=_MAX_LABEL_KEY)]
LabelValue = Annotated[str, StringConstraints(max_length=_MAX_LABEL_VALUE)]


class _Lenient(BaseModel):
    # A real node carries many fields Sluice does not read (spec, conditions, images, ...).
    model_config = ConfigDict(extra="ignore", frozen=True)


class KubeMetadata(_Lenient):
    name: str = Field(min_length=1, max_length=_MAX_NAME)
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=_MAX_ENTRIES)


class KubeNodeStatus(_Lenient):
    allocatable: dict[str, str | int] = Field(max_length=_MAX_ENTRIES)


class KubeNode(_Lenient):
    metadata: KubeMetadata
    status: KubeNodeStatus


@dataclass(frozen=True)
class ImportedPool:
    """One node pool as imported, with what the import had to decide about it."""

    pool: NodePool
    narrowed: tuple[str, ...]  # resources whose nodes differ: the smallest was taken


def nodes_of(data: Any, source: str) -> list[KubeNode]:
    """The nodes of a `kubectl get nodes -o json` document (a List) or of one Node."""
    if isinstance(data, dict) and data.get("kind") == "Node":
        data = {"items": [data]}
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise InvalidInput(f"{source}: expected `kubectl get nodes -o json` output (a List)")
    items: list[Any] = data["items"]
    if len(items) > MAX_NODES:
        raise InvalidInput(f"{source}: {len(items):,} nodes is above the limit of {MAX_NODES:,}")
    nodes = []
    for index, item in enumerate(items):
        name = _name_of(item) or f"items.{index}"
        try:
            nodes.append(KubeNode.model_validate(item))
        except ValidationError as error:
            raise InvalidInput(validation_message(error, f"{source}: node {name}")) from None
    return nodes


def _name_of(item: Any) -> str | None:
    metadata = item.get("metadata") if isinstance(item, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name[:_MAX_NAME] if isinstance(name, str) and name else None


def pool_name(node: KubeNode, pool_label: str | None) -> str:
    """The node's pool: the given label's value, else the first provider label; `default`
    for a node without one (D96)."""
    labels = node.metadata.labels
    for label in (pool_label,) if pool_label else POOL_LABELS:
        if labels.get(label):
            return labels[label]
    return DEFAULT_POOL


# Words of a product name that say vendor, form factor or memory type, not which device.
_PACKAGING = {"nvidia", "tesla", "sxm", "sxm2", "sxm3", "sxm4", "sxm5", "pcie", "hbm2", "hbm2e",
              "hbm3", "hbm3e", "nvl"}  # fmt: skip
_MIG_SUFFIX = re.compile(r"-MIG-(?P<profile>[0-9]+g\.[0-9]+gb)$", re.IGNORECASE)


def device_of_product(product: str, field: str, overrides: Mapping[str, str]) -> Device:
    """The canonical device for a GPU product label (`NVIDIA-H100-80GB-HBM3`, `Tesla-T4`,
    GKE's `nvidia-tesla-t4`); `overrides` maps a product to any device spelling first.

    An unknown product is an error naming it (D95): guessing would put work on the wrong
    hardware, and models.devices never makes up a device type."""
    if product in overrides:
        return parse_device(overrides[product], field)
    partition = None
    mig = _MIG_SUFFIX.search(product)
    if mig:  # the single MIG strategy names the slice in the product label
        product, partition = product[: mig.start()], mig.group("profile").lower()
    words = [w for w in re.split(r"[-_\s]+", product) if w and w.lower() not in _PACKAGING]
    memory = [w for w in words if re.fullmatch(r"[0-9]+GB?", w, re.IGNORECASE)]
    model = " ".join(w for w in words if w not in memory)
    spellings = [" ".join(words), " ".join([model, *(m.rstrip("Bb") for m in memory)])]
    if not memory:
        spellings.append(model.split(" ")[0])
    for spelling in spellings:
        try:
            device = parse_device(spelling, field)
        except InvalidInput:
            continue
        return Device(device.kind, device.name, partition)
    raise InvalidInput(
        f"{field}: unknown GPU product {product!r}; map it with --device '{product}=DEVICE'"
        " (a device models.devices knows, e.g. H100)",
        field=field,
    )


@dataclass(frozen=True)
class _NodeShapeSpec:
    cpu: int
    memory: int
    device: Device | None
    devices: int


def _shape_of(node: KubeNode, overrides: Mapping[str, str]) -> _NodeShapeSpec:
    name = node.metadata.name
    allocatable = node.status.allocatable

    def quantity(resource: str, kube_name: str) -> int:
        where = f"node {name}: status.allocatable.{kube_name}"
        if kube_name not in allocatable:
            raise InvalidInput(f"{where}: missing", field=f"status.allocatable.{kube_name}")
        return parse_quantity(resource, allocatable[kube_name], where)

    def count(kube_name: str) -> int:
        where = f"node {name}: status.allocatable.{kube_name}"
        return parse_quantity(kube_name, allocatable.get(kube_name, 0), where, MAX_ACCELERATORS)

    devices = {key: count(key) for key in allocatable if key.startswith(MIG_PREFIX)}
    devices = {key: amount for key, amount in devices.items() if amount}
    gpus = count(GPU_RESOURCE)
    if gpus:
        devices[GPU_RESOURCE] = gpus
    if len(devices) > 1:
        raise InvalidInput(
            f"node {name}: offers {', '.join(sorted(devices))}; a Sluice node pool holds one"
            " device type (D97), so a node of mixed MIG slices cannot be imported",
            field="status.allocatable",
        )
    cpu, memory = quantity(CPU, CPU), quantity(MEMORY, MEMORY)
    if not devices:
        return _NodeShapeSpec(cpu, memory, None, 0)
    ((resource, amount),) = devices.items()
    labels = node.metadata.labels
    product_label = next((lb for lb in (GPU_PRODUCT_LABEL, GKE_ACCELERATOR_LABEL) if lb in labels),
                         None)  # fmt: skip
    if product_label is None:
        raise InvalidInput(
            f"node {name}: offers {resource} but has no {GPU_PRODUCT_LABEL} label to say which"
            " device (is the GPU feature discovery running?)",
            field=f"metadata.labels.{GPU_PRODUCT_LABEL}",
        )
    field = f"node {name}: metadata.labels.{product_label}"
    device = device_of_product(labels[product_label], field, overrides)
    if resource.startswith(MIG_PREFIX):
        device = Device(device.kind, device.name, resource.removeprefix(MIG_PREFIX).lower())
    return _NodeShapeSpec(cpu, memory, device, amount)


def import_pools(
    nodes: list[KubeNode], pool_label: str | None = None, overrides: Mapping[str, str] = {}
) -> list[ImportedPool]:
    """Nodes grouped into node pools, in the order each pool is first seen."""
    grouped: dict[str, list[KubeNode]] = {}
    for node in nodes:
        grouped.setdefault(pool_name(node, pool_label), []).append(node)
    return [_pool_of(name, members, overrides) for name, members in grouped.items()]


def _pool_of(name: str, members: list[KubeNode], overrides: Mapping[str, str]) -> ImportedPool:
    shapes = [(node.metadata.name, _shape_of(node, overrides)) for node in members]
    devices = {shape.device for _, shape in shapes}
    if len(devices) > 1:
        shown = ", ".join(sorted(str(device) if device else "none" for device in devices))
        raise InvalidInput(
            f"node pool {name}: its nodes offer different devices ({shown}); split it with"
            " --pool-label",
            field="metadata.labels",
        )
    cpu = min(shape.cpu for _, shape in shapes)
    memory = min(shape.memory for _, shape in shapes)
    accelerators = min(shape.devices for _, shape in shapes)
    narrowed = tuple(
        what
        for what, values in (
            (CPU, {shape.cpu for _, shape in shapes}),
            (MEMORY, {shape.memory for _, shape in shapes}),
            ("accelerators", {shape.devices for _, shape in shapes}),
        )
        if len(values) > 1
    )
    device = devices.pop()
    common = {k: v for k, v in members[0].metadata.labels.items() if k not in _PER_NODE_LABELS}
    for node in members[1:]:
        common = {k: v for k, v in common.items() if node.metadata.labels.get(k) == v}
    shape = {
        CPU: format_quantity(CPU, cpu),
        MEMORY: format_quantity(MEMORY, memory),
        "accelerator": device.canonical if device else None,
        "accelerators": accelerators,
    }
    pool = NodePool.model_validate(
        {"name": name, "node": shape, "labels": common, "nodes": len(members)}
    )
    return ImportedPool(pool, narrowed)


def import_cluster(
    data: Any,
    name: str,
    source: str,
    pool_label: str | None = None,
    overrides: Mapping[str, str] = {},
) -> tuple[Cluster, list[ImportedPool]]:
    """The cluster `name` made of the nodes in `data` (see nodes_of)."""
    nodes = nodes_of(data, source)
    try:
        pools = import_pools(nodes, pool_label, overrides)
    except InvalidInput as error:
        raise InvalidInput(f"{source}: {error.message}", field=error.field) from None
    try:
        cluster = Cluster(name=name, node_pools=[imported.pool for imported in pools])
    except ValidationError as error:
        raise InvalidInput(validation_message(error, f"{source}: cluster {name}")) from None
    return cluster, pools
