"""`sluice import kube`: cluster definitions from what a real cluster reports."""

from __future__ import annotations

from pathlib import Path

import click
import yaml

from api.cli.context import Remote
from api.client import FleetConfig
from models.errors import InvalidInput
from models.kube import POOL_LABELS, import_cluster
from models.scenario import read_json


def _device_overrides(pairs: tuple[str, ...]) -> dict[str, str]:
    overrides = {}
    for pair in pairs:
        product, sep, device = pair.partition("=")
        if not sep or not product.strip() or not device.strip():
            raise InvalidInput(f"--device: {pair!r} is not PRODUCT=DEVICE", field="device")
        overrides[product.strip()] = device.strip()
    return overrides


@click.command("kube")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", help="The cluster's name [default: the file's name without its suffix].")
@click.option(
    "--pool-label",
    metavar="LABEL",
    help=f"The node label naming a node's pool [default: the first of {', '.join(POOL_LABELS)}].",
)
@click.option(
    "--device",
    "devices",
    multiple=True,
    metavar="PRODUCT=DEVICE",
    help="Read this nvidia.com/gpu.product value as this device (repeat), for a product"
    " Sluice does not know.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the YAML here instead of stdout.",
)
@click.option(
    "--apply",
    "apply_to_server",
    is_flag=True,
    help="PUT the cluster to the server (--url) instead of writing YAML.",
)
@click.pass_obj
def import_kube(
    remote: Remote,
    file: Path,
    name: str | None,
    pool_label: str | None,
    devices: tuple[str, ...],
    out: Path | None,
    apply_to_server: bool,
) -> None:
    """Turn `kubectl get nodes -o json` output (FILE) into a Sluice cluster definition.

    Nodes group into node pools by their pool label; each pool's node shape is the
    smallest allocatable CPU, memory and GPU count of its nodes. Prints a scenario
    file's `clusters:` section, or puts the cluster with --apply.
    """
    cluster, pools = import_cluster(
        read_json(file), name or file.stem, str(file), pool_label, _device_overrides(devices)
    )
    notes = [
        f"# node pool {imported.pool.name}: its nodes differ in {', '.join(imported.narrowed)};"
        " the smallest allocatable of each was taken"
        for imported in pools
        if imported.narrowed
    ]
    for note in notes:
        click.echo(note.removeprefix("# "), err=True)
    body = cluster.model_dump(mode="json", exclude_defaults=True)
    if apply_to_server:
        FleetConfig.put_cluster(body, client=remote.client)
        click.echo(f"cluster {cluster.name} put ({len(pools)} node pools)")
        return
    text = "".join(f"{note}\n" for note in notes) + yaml.safe_dump(
        {"clusters": [body]}, sort_keys=False
    )
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
        click.echo(f"wrote {out} ({len(pools)} node pools)", err=True)
