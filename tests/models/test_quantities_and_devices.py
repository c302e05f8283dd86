"""Quantities and device names, parsed once at the boundary."""

import pytest

from models.devices import parse_accelerator_request, parse_device
from models.errors import InvalidInput
from models.quantity import format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", "512", 512_000),
        ("cpu", "0.5", 500),
        ("memory", "4Ti", 4 * 2**40),
        ("memory", "64Gi", 64 * 2**30),
        ("memory", "1G", 10**9),
        ("memory", "1e3", 1000),
        ("ephemeral-storage", "10Gi", 10 * 2**30),
    ],
)
def test_quantities_parse_into_integer_units(resource: str, text: str, units: int) -> None:
    assert parse_quantity(resource, text, "field") == units


@pytest.mark.parametrize("text", ["", "lots", "4TB", "-1", "1.5.2", "0.5m"])
def test_bad_quantity_is_an_error_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"queues\.0\.max_resources\.cpu"):
        parse_quantity("cpu", text, "queues.0.max_resources.cpu")


@pytest.mark.parametrize(
    ("resource", "units"),
    [("cpu", 500), ("cpu", 512_000), ("memory", 4 * 2**40), ("memory", 10**9)],
)
def test_formatting_round_trips(resource: str, units: int) -> None:
    assert parse_quantity(resource, format_quantity(resource, units), "x") == units


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        # "Name a device the way a task does (T4, A100 80G, V6E) or by its canonical name
        # (nvidia-t4, nvidia-a100-80gb, google-tpu-v6e). The queue stores and prints the
        # canonical name, for example nvidia_gpu/nvidia-h100."
        ("T4", "nvidia_gpu/nvidia-t4"),
        ("A100 80G", "nvidia_gpu/nvidia-a100-80gb"),
        ("V6E", "google_tpu/google-tpu-v6e"),
        ("nvidia-t4", "nvidia_gpu/nvidia-t4"),
        ("nvidia-a100-80gb", "nvidia_gpu/nvidia-a100-80gb"),
        ("google-tpu-v6e", "google_tpu/google-tpu-v6e"),
        ("H100", "nvidia_gpu/nvidia-h100"),
        ("nvidia_gpu/nvidia-h100", "nvidia_gpu/nvidia-h100"),
        # "To cap one partition size of a device, add the partition: A100/1g.5gb=4."
        ("A100/1g.5gb", "nvidia_gpu/nvidia-a100/1g.5gb"),
    ],
)
def test_device_aliases_map_to_one_canonical_name(spelling: str, canonical: str) -> None:
    assert parse_device(spelling, "gpu").canonical == canonical


def test_unknown_device_is_an_error_not_a_new_type() -> None:
    with pytest.raises(InvalidInput, match="unknown device 'H900'"):
        parse_device("H900", "containers.0.gpu")


def test_accelerator_requests_typed_and_untyped() -> None:
    typed = parse_accelerator_request("H100:4", "gpu")
    assert typed is not None and typed.count == 4 and typed.device is not None
    assert typed.device.canonical == "nvidia_gpu/nvidia-h100"
    untyped = parse_accelerator_request(2, "gpu")
    assert untyped is not None and untyped.count == 2 and untyped.device is None
    assert parse_accelerator_request("T4", "gpu").count == 1  # type: ignore[union-attr]
