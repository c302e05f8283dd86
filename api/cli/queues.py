"""`sluice` commands for the capped queues of the seed: queues, actions, and the fleet they
run on (clusters, settings, reusable environments, put from a file with `sluice apply`).

    sluice create queue research --run-concurrency 100 --max-accelerators H100=48
    sluice get queue --watch
    sluice submit --queue research --resources cpu=8 --gpu H100:4
    sluice apply fleet.yaml

api.cli.main hangs these on its verb groups (`create queue`, `get action`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from api.cli.context import (
    OUTPUT,
    Remote,
    as_yaml,
    emit,
    emit_frames,
    pass_remote,
    terminal_width,
)
from api.cli.job_queues import apply_quota
from api.cli.render import action_detail, queue_detail, queue_table
from api.client import Action, FleetConfig, Queue
from models.errors import InvalidInput
from models.scenario import read_yaml

SCHEDULING = click.Choice(["strict_fifo", "greedy_capacity"])


# -- option parsing --------------------------------------------------------------------------


def _pairs(values: Iterable[str], option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, sep, amount = value.partition("=")
        if not sep or not key.strip() or not amount.strip():
            raise InvalidInput(f"{option}: expected NAME=VALUE, got {value!r}", field=option)
        pairs[key.strip()] = amount.strip()
    return pairs


def _parse_counts(values: Iterable[str], option: str) -> dict[str, int]:
    counts = {}
    for device, amount in _pairs(values, option).items():
        if not amount.isdigit():
            raise InvalidInput(f"{option}: {device}={amount}: not a whole number", field=option)
        counts[device] = int(amount)
    return counts


def _queue_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The queue settings shared by `create queue` and `update queue`."""
    options = [
        click.option("--pool", help="The pool the queue belongs to (for watch --pool)."),
        click.option("--run-concurrency", type=click.IntRange(min=0), help="Most active runs."),
        click.option(
            "--action-concurrency", type=click.IntRange(min=0), help="Most running actions."
        ),
        click.option(
            "--depth",
            type=click.IntRange(min=0),
            help="Most actions in flight plus waiting; beyond it RESOURCE_EXHAUSTED.",
        ),
        click.option("--priority", type=int, help="Higher is scheduled first across queues."),
        click.option(
            "--max-resources",
            multiple=True,
            metavar="NAME=QUANTITY",
            help="Cap one resource (cpu=512, memory=4Ti); repeat for several.",
        ),
        click.option(
            "--max-gpus", type=click.IntRange(min=0), help="Cap GPUs requested without a type."
        ),
        click.option(
            "--max-accelerators",
            multiple=True,
            metavar="DEVICE=COUNT",
            help="Cap one device type (H100=48, A100/1g.5gb=4); repeat for several.",
        ),
        click.option("--scheduling", type=SCHEDULING, help="What to do when the head won't fit."),
        click.option(
            "--cluster",
            "clusters",
            multiple=True,
            help="Route to this cluster (repeat; all clusters when omitted).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _settings(
    max_resources: tuple[str, ...],
    max_accelerators: tuple[str, ...],
    clusters: tuple[str, ...],
    **plain: Any,
) -> dict[str, Any]:
    """The given queue settings as the API's keywords (unset ones left out)."""
    settings = {key: value for key, value in plain.items() if value is not None}
    if max_resources:
        settings["max_resources"] = _pairs(max_resources, "--max-resources")
    if max_accelerators:
        settings["max_accelerators"] = _parse_counts(max_accelerators, "--max-accelerators")
    if clusters:
        settings["clusters"] = list(clusters)
    return settings


@click.command("queue")
@click.argument("name")
@_queue_options
@OUTPUT
@pass_remote
def create_queue(remote: Remote, name: str, output: str, **options: Any) -> None:
    """Create queue NAME with caps and a scheduling policy.

    \b
    sluice create queue research --run-concurrency 100 --action-concurrency 1000 \\
      --max-resources cpu=512 --max-resources memory=4Ti --max-accelerators H100=48 \\
      --scheduling greedy_capacity
    """
    queue = Queue.create(name, client=remote.client, **_settings(**options))
    emit(queue, output, queue_detail)


@click.command("queue")
@click.argument("name")
@_queue_options
@click.option("--clear-max-resources", is_flag=True, help="Remove every resource cap.")
@click.option("--clear-max-gpus", is_flag=True, help="Remove the untyped GPU cap.")
@click.option("--clear-max-accelerators", is_flag=True, help="Remove every device cap.")
@OUTPUT
@pass_remote
def update_queue(
    remote: Remote,
    name: str,
    clear_max_resources: bool,
    clear_max_gpus: bool,
    clear_max_accelerators: bool,
    output: str,
    **options: Any,
) -> None:
    """Change a live queue; the next tick uses the new values.

    --max-resources and --max-accelerators replace the queue's whole map of
    that kind: give every cap you want to keep.

    \b
    sluice update queue research --max-resources cpu=768 --max-resources memory=6Ti
    sluice update queue research --clear-max-gpus
    sluice update queue research --scheduling strict_fifo
    """
    changes = _settings(**options)
    if not changes and not (clear_max_resources or clear_max_gpus or clear_max_accelerators):
        raise InvalidInput("nothing to change: give at least one option (see --help)")
    queue = Queue.update(
        name,
        clear_max_resources=clear_max_resources,
        clear_max_gpus=clear_max_gpus,
        clear_max_accelerators=clear_max_accelerators,
        client=remote.client,
        **changes,
    )
    emit(queue, output, queue_detail)


def _fitted_table(queues: list[dict[str, Any]]) -> str:
    """The queues' table at the terminal's width as of this frame (a resized window fits)."""
    return queue_table(queues, terminal_width())


@click.command("queue")
@click.argument("name", required=False)
@click.option("--watch", is_flag=True, help="Keep updating, once per tick.")
@click.option("--pool", "pools", multiple=True, help="Only queues in this pool (repeat).")
@click.option("--limit", type=click.IntRange(min=1), help="With --watch: stop after N updates.")
@OUTPUT
@pass_remote
def get_queue(
    remote: Remote,
    name: str | None,
    watch: bool,
    pools: tuple[str, ...],
    limit: int | None,
    output: str,
) -> None:
    """One queue with a usage bar per cap, or every queue in a table.

    \b
    sluice get queue research            settings plus a usage bar for each cap
    sluice get queue research --watch    the same view, updating live
    sluice get queue --watch             every live queue in one table
    sluice get queue --watch --pool gpu-pool
    """
    client = remote.client
    if name and pools:
        raise InvalidInput("--pool selects queues for the table; leave it out with a NAME")
    if name:
        if watch:
            emit_frames(Queue.watch(name, limit=limit, client=client), output, queue_detail)
        else:
            emit(Queue.details(name, client=client), output, queue_detail)
    elif watch:
        stream = Queue.watch_pool(list(pools) or None, limit=limit, client=client)
        emit_frames(stream, output, _fitted_table)
    else:
        emit(Queue.list(list(pools) or None, client=client), output, _fitted_table)


@click.command("queue")
@click.argument("name")
@click.option("--undo", is_flag=True, help="Accept submissions again.")
@OUTPUT
@pass_remote
def drain_queue(remote: Remote, name: str, undo: bool, output: str) -> None:
    """Accept nothing new on NAME; what it holds still runs."""
    emit(Queue.drain(name, undo=undo, client=remote.client), output, queue_detail)


@click.command("queue")
@click.argument("name")
@pass_remote
def delete_queue(remote: Remote, name: str) -> None:
    """Delete an empty queue (drain it and let it finish first)."""
    Queue.delete(name, client=remote.client)
    click.echo(f"queue {name} deleted")


@click.command("queue")
@click.argument("name")
@click.option("--to", "to", required=True, help="The destination queue.")
@click.option("--where", help="Only actions whose requests match: gpu>=8, memory>64Gi,cpu<=4.")
@pass_remote
def move_queue(remote: Remote, name: str, to: str, where: str | None) -> None:
    """Move NAME's waiting actions to queue --to, all or none, keeping their arrival order.

    \b
    sluice move queue research --to research-large --where "gpu>=8"
    """
    ids = Queue.move(name, to=to, where=where, client=remote.client)
    click.echo(f"{len(ids)} action{'s' if len(ids) != 1 else ''} moved to queue {to}")
    for one in ids:
        click.echo(one)


# -- actions ---------------------------------------------------------------------------------


def action_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """What one submitted action holds, shared by `submit` and `create trigger`."""
    options = [
        click.option(
            "--resources",
            multiple=True,
            metavar="NAME=QUANTITY",
            help="A request: cpu=2, memory=8Gi.",
        ),
        click.option("--gpu", help="Accelerators: H100:4 or T4 (typed), 2 (untyped NVIDIA GPUs)."),
        click.option("--node-selector", multiple=True, metavar="LABEL=VALUE", help="Node labels."),
        click.option("--environment", help="Run in this reusable environment (no containers)."),
        click.option("--max-queued-time", help="Fail if not scheduled within this time (30m, 1h)."),
        click.option(
            "--count",
            type=click.IntRange(min=1),
            default=1,
            help="Submit N copies at once (ids ID-1 ... ID-N with --id, else made by the server).",
        ),
        click.option(
            "-f",
            "--file",
            "path",
            type=click.Path(path_type=Path, dir_okay=False),
            help="YAML/JSON list of actions (the API's submit bodies), submitted all or none.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def action_specs(
    path: Path | None,
    count: int,
    resources: tuple[str, ...],
    gpu: str | None,
    node_selector: tuple[str, ...],
    environment: str | None,
    max_queued_time: str | None,
    **fields: Any,
) -> list[dict[str, Any]]:
    """The submission bodies the options describe: a file's list, or `count` copies of one
    action (`fields` adds the command's own: queue, run, deadline)."""
    if path is not None:
        data = read_yaml(path)
        specs = data.get("actions") if isinstance(data, dict) else data
        if not isinstance(specs, list):
            raise InvalidInput(f"{path}: expected a list of actions (or a mapping with actions)")
        return specs
    spec = Action.spec(
        resources=_pairs(resources, "--resources"),
        gpu=gpu,
        node_selector=_pairs(node_selector, "--node-selector") or None,
        environment=environment,
        max_queued_time=max_queued_time,
        **fields,
    )
    return [spec] * count


@click.command()
@click.option(
    "--queue",
    help="This invocation's queue [default: its run's, its task's, its environment's, else"
    " the default queue].",
)
@click.option("--task", help="A stored task template: what the flags do not give comes from it.")
@click.option("--id", "action_id", help="The action's id [default: made by the server].")
@click.option("--run", help="The run it belongs to [default: its own id].")
@click.option("--run-queue", help="Create the run on this queue; its later actions inherit it.")
@click.option("--deadline", help="Fail if not done by this time or after this duration.")
@click.option(
    "--expected-duration",
    help="How long it runs once started (2h, 90m), for forecasts of when waiting work starts"
    " [default: learned from its task's or queue's finished work].",
)
@action_options
@click.option("--wait", is_flag=True, help="Wait until scheduled; a failure is the exit status.")
@pass_remote
def submit(
    remote: Remote,
    queue: str | None,
    task: str | None,
    action_id: str | None,
    run: str | None,
    run_queue: str | None,
    deadline: str | None,
    expected_duration: str | None,
    wait: bool,
    **options: Any,
) -> None:
    """Queue actions; prints their ids, one per line.

    \b
    sluice submit --queue research --resources cpu=8 --resources memory=64Gi --gpu H100:4
    sluice submit --queue research --environment embedder --count 20
    sluice submit --task train --run nightly-7 --run-queue gpu-pool
    sluice submit --queue research --gpu H100:8 --expected-duration 6h
    sluice submit -f actions.yaml
    """
    client = remote.client
    specs = action_specs(
        queue=queue,
        task=task,
        run=run,
        run_queue=run_queue,
        deadline=deadline,
        expected_duration=expected_duration,
        **options,
    )
    if options["path"] is None and action_id is not None:  # else the server makes each id
        if len(specs) == 1:
            specs = [specs[0] | {"id": action_id}]
        else:
            specs = [spec | {"id": f"{action_id}-{i}"} for i, spec in enumerate(specs, 1)]
    ids = Action.submit_batch(specs, client=client)
    for one in ids:
        click.echo(one)
    if wait:
        for one in ids:
            action = Action.wait(one, client=client)
            click.echo(f"{one}: {action['state']}", err=True)


@click.command("action")
@click.argument("action_id")
@OUTPUT
@pass_remote
def get_action(remote: Remote, action_id: str, output: str) -> None:
    """One action: state, placement, why it waits or why it failed."""
    emit(Action.get(action_id, client=remote.client), output, action_detail)


@click.command("actions")
@click.option("--queue", help="Only this queue.")
@click.option(
    "--state",
    type=click.Choice(["queued", "scheduled", "running", "succeeded", "failed", "cancelled"]),
    help="Only actions in this state.",
)
@click.option("--run", help="Only the actions of this run.")
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=50,
    show_default=True,
    help="Most actions on one page.",
)
@click.option(
    "--order",
    type=click.Choice(["desc", "asc"]),
    default=None,
    help="desc: newest first (the default); asc: in arrival order. A --page-token keeps the"
    " order of the listing it continues.",
)
@click.option("--page-token", help="Continue a listing where its last page ended.")
@OUTPUT
@pass_remote
def get_actions(
    remote: Remote,
    queue: str | None,
    state: str | None,
    run: str | None,
    limit: int,
    order: str | None,
    page_token: str | None,
    output: str,
) -> None:
    """Actions, newest first, a page at a time (the next page's token goes to stderr)."""
    actions, next_token = Action.page(
        queue=queue,
        state=state,
        run=run,
        limit=limit,
        order=order or (None if page_token else "desc"),
        page_token=page_token,
        client=remote.client,
    )
    if next_token is not None:
        click.echo(f"more: --page-token {next_token}", err=True)

    def table(rows: list[dict[str, Any]]) -> str:
        lines = [f"{'ID':<32} {'QUEUE':<16} {'STATE':<10} DETAIL"]
        for action in rows:
            if action["state"] == "failed":
                detail = f"{action['code'] or 'FAILED'}: {action['message']}"
            elif action["waiting_reason"]:
                detail = f"{action['waiting_reason']}: {action['waiting_message']}"
            elif action["placement"]:
                detail = f"on {action['placement']['cluster']}"
            else:
                detail = f"in environment {action['environment']}" if action["environment"] else ""
            lines.append(f"{action['id']:<32} {action['queue']:<16} {action['state']:<10} {detail}")
        return "\n".join(lines)

    emit(actions, output, table)


@click.command("action")
@click.argument("action_ids", nargs=-1, required=True)
@click.option("--to", "to", required=True, help="The destination queue.")
@pass_remote
def move_action(remote: Remote, action_ids: tuple[str, ...], to: str) -> None:
    """Move waiting actions to queue --to, all or none, keeping their arrival order."""
    ids = Action.move(list(action_ids), to=to, client=remote.client)
    click.echo(f"{len(ids)} action{'s' if len(ids) != 1 else ''} moved to queue {to}")


@click.command("action")
@click.argument("action_id")
@pass_remote
def cancel_action(remote: Remote, action_id: str) -> None:
    """Cancel an action; if it was scheduled its charges are freed."""
    action = Action.cancel(action_id, client=remote.client)
    click.echo(f"{action['id']}: {action['state']}")


# -- fleet -----------------------------------------------------------------------------------


@click.command()
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False))
@pass_remote
def apply(remote: Remote, path: Path) -> None:
    """Put settings, clusters, queues and environments from a scenario-shaped YAML file.

    Queues that exist are updated with the file's settings. Actions in the
    file are not submitted (use `sluice submit -f`).
    """
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a mapping with settings, clusters, queues")
    client = remote.client
    if "settings" in data:
        FleetConfig.put_settings(data["settings"] or {}, client=client)
        click.echo("settings put")
    for cluster in data.get("clusters") or []:
        FleetConfig.put_cluster(cluster, client=client)
        click.echo(f"cluster {cluster['name']} put")
    for queue in data.get("queues") or []:
        verb = FleetConfig.put_queue(_settings_only(queue), client=client)
        click.echo(f"queue {queue['name']} {verb}")
    for environment in data.get("environments") or []:
        FleetConfig.put_environment(_settings_only(environment), client=client)
        click.echo(f"environment {environment['name']} put")
    for line in apply_quota(data, client):  # scheduling policies, service environments, job queues
        click.echo(line)


def _settings_only(entry: dict[str, Any]) -> dict[str, Any]:
    """Drop what a scenario file may carry as runtime state: the tick and executors own it."""
    return {key: value for key, value in entry.items() if key not in _RUNTIME_STATE}


_RUNTIME_STATE = frozenset({"head_blocked_since", "running", "placement"})


@click.command("cluster")
@click.argument("name", required=False)
@OUTPUT
@pass_remote
def get_cluster(remote: Remote, name: str | None, output: str) -> None:
    """One cluster's node pools (or every cluster), as YAML."""
    client = remote.client
    data = (
        FleetConfig.get_cluster(name, client=client)
        if name
        else FleetConfig.clusters(client=client)
    )
    emit(data, output, as_yaml)


@click.command("settings")
@click.option("--default-gpu-type", help="The device an untyped GPU request means (T4, H100).")
@click.option("--clear-default-gpu-type", is_flag=True, help="Untyped requests name no device.")
@pass_remote
def update_settings(
    remote: Remote, default_gpu_type: str | None, clear_default_gpu_type: bool
) -> None:
    """Change the organization settings; the next tick uses them.

    \b
    sluice update settings --default-gpu-type T4
    """
    if (default_gpu_type is None) == (not clear_default_gpu_type):
        raise InvalidInput("give one of --default-gpu-type or --clear-default-gpu-type")
    client = remote.client
    settings = FleetConfig.settings(client=client) | {"default_gpu_type": default_gpu_type}
    put = FleetConfig.put_settings(settings, client=client)
    click.echo(as_yaml(put))


@click.command("settings")
@OUTPUT
@pass_remote
def get_settings(remote: Remote, output: str) -> None:
    """The organization settings, as YAML."""
    emit(FleetConfig.settings(client=remote.client), output, as_yaml)
