"""Accelerator device names: one table from every accepted spelling to one canonical name.

A task names a device the way people write it (`H100:1`, `T4`, `A100 80G`, `V6E`) or
by its canonical short name (`nvidia-t4`); queues store and print the canonical
form `nvidia_gpu/nvidia-h100`. A partition (`A100/1g.5gb`) is a device of its own
for caps and node pools. An unknown name is an error, never a new device type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from models.errors import InvalidInput
from models.limits import MAX_ACCELERATORS, MAX_SPELLING

NVIDIA_GPU = "nvidia_gpu"
GOOGLE_TPU = "google_tpu"
AMD_GPU = "amd_gpu"

# canonical short name -> (kind, aliases as people write them)
_DEVICES: dict[str, tuple[str, tuple[str, ...]]] = {
    "nvidia-t4": (NVIDIA_GPU, ("T4", "Tesla T4")),
    "nvidia-l4": (NVIDIA_GPU, ("L4",)),
    "nvidia-l40s": (NVIDIA_GPU, ("L40S",)),
    "nvidia-a10": (NVIDIA_GPU, ("A10",)),
    "nvidia-a10g": (NVIDIA_GPU, ("A10G",)),
    "nvidia-a100": (NVIDIA_GPU, ("A100", "A100 40G", "A100-40GB")),
    "nvidia-a100-80gb": (NVIDIA_GPU, ("A100 80G", "A100-80G", "A100 80GB")),
    "nvidia-h100": (NVIDIA_GPU, ("H100", "H100 80G", "H100-80GB")),
    "nvidia-h100-mega-80gb": (NVIDIA_GPU, ("H100 MEGA", "H100-MEGA")),
    "nvidia-h200": (NVIDIA_GPU, ("H200",)),
    "nvidia-b200": (NVIDIA_GPU, ("B200",)),
    "nvidia-tesla-p100": (NVIDIA_GPU, ("P100",)),
    "nvidia-tesla-v100": (NVIDIA_GPU, ("V100",)),
    "nvidia-tesla-v100-16gb": (NVIDIA_GPU, ("V100M16", "V100 16G")),
    "nvidia-tesla-v100-32gb": (NVIDIA_GPU, ("V100M32", "V100 32G")),
    # The Alibaba GPU trace (the benchmark's alibaba scenarios, docs/benchmarks.md) hides three
    # models behind these codes.
    "alibaba-g1": (NVIDIA_GPU, ("G1",)),
    "alibaba-g2": (NVIDIA_GPU, ("G2",)),
    "alibaba-g3": (NVIDIA_GPU, ("G3",)),
    "google-tpu-v4": (GOOGLE_TPU, ("V4", "TPU V4")),
    "google-tpu-v5e": (GOOGLE_TPU, ("V5E", "V5 LITE", "TPU V5E")),
    "google-tpu-v5p": (GOOGLE_TPU, ("V5P", "TPU V5P")),
    "google-tpu-v6e": (GOOGLE_TPU, ("V6E", "TPU V6E")),
    "amd-mi300x": (AMD_GPU, ("MI300X",)),
}
_KINDS = (NVIDIA_GPU, GOOGLE_TPU, AMD_GPU)
_PARTITION = re.compile(r"^[0-9a-z][0-9a-z.x-]*$")
# A count spelled longer than any quantity is out of range anyway; int() need not read it.
_COUNT = re.compile(rf"^[0-9]{{1,{MAX_SPELLING}}}$")


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).lower()


_LOOKUP: dict[str, str] = {}
for _short, (_kind, _aliases) in _DEVICES.items():
    for _spelling in (_short, f"{_kind}/{_short}", *_aliases):
        _LOOKUP[_key(_spelling)] = _short


@dataclass(frozen=True, order=True)
class Device:
    """A canonical device type, optionally one partition size of it."""

    kind: str
    name: str
    partition: str | None = None

    @property
    def canonical(self) -> str:
        base = f"{self.kind}/{self.name}"
        return f"{base}/{self.partition}" if self.partition else base

    @property
    def is_nvidia(self) -> bool:
        return self.kind == NVIDIA_GPU

    def __str__(self) -> str:
        return self.canonical


def parse_device(text: str, field: str) -> Device:
    """Resolve any accepted spelling of a device (with an optional `/partition`)."""
    spelling = text.strip()
    for kind in _KINDS:
        if spelling.lower().startswith(kind + "/"):
            spelling = spelling[len(kind) + 1 :]
            break
    name, _, partition = spelling.partition("/")
    short = _LOOKUP.get(_key(name))
    if short is None:
        known = ", ".join(sorted({aliases[0] for _, aliases in _DEVICES.values()}))
        raise InvalidInput(f"{field}: unknown device {text!r}; known devices: {known}", field=field)
    size = partition.strip().lower() or None
    if size is not None and not _PARTITION.match(size):
        raise InvalidInput(f"{field}: {size!r} is not a partition size (example: 1g.5gb)")
    return Device(_DEVICES[short][0], short, size)


@dataclass(frozen=True)
class AcceleratorRequest:
    """What one container asks for: `count` devices of `device`, or untyped NVIDIA GPUs."""

    count: int
    device: Device | None  # None: any NVIDIA GPU ("gpu=2")

    def __str__(self) -> str:
        return f"{self.device}:{self.count}" if self.device else f"gpu={self.count}"


def parse_accelerator_request(value: str | int, field: str) -> AcceleratorRequest | None:
    """`2` or `"2"` is untyped; `"H100:4"`, `"T4"`, `"A100/1g.5gb:2"` are typed.

    At most models.limits.MAX_ACCELERATORS devices."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidInput(f"{field}: {value!r} is not an accelerator request")
    if isinstance(value, int):
        count, device = value, None
    else:
        text = value.strip()
        if _COUNT.match(text):
            count, device = int(text), None
        else:
            name, sep, number = text.rpartition(":")
            if sep and _COUNT.match(number.strip()):
                count, device = int(number), parse_device(name, field)
            else:
                count, device = 1, parse_device(text, field)
    if count < 0:
        raise InvalidInput(f"{field}: accelerator count {count} is negative")
    if count > MAX_ACCELERATORS:
        raise InvalidInput(
            f"{field}: {count} accelerators is above the limit of {MAX_ACCELERATORS:,}"
            " per container",
            field=field,
        )
    return AcceleratorRequest(count, device) if count else None
