"""`sluice` commands for task templates: what `sluice submit --task` starts from.

    sluice create task train --resources cpu=8 --gpu H100:1 --queue gpu-pool
    sluice create task embed --environment embedder
    sluice get tasks
    sluice get task train
    sluice delete task train
    sluice submit --task train --run nightly-7 --run-queue batch

A submission without --queue goes to its run's queue, else its task's, else its
environment's, else the default queue (`sluice get action` says which). api.cli.main hangs
these on its verb groups.
"""

from __future__ import annotations

from typing import Any

import click

from api.calls import Tasks
from api.cli.context import OUTPUT, Remote, emit, pass_remote
from api.cli.queues import action_specs
from api.client import Task


def task_detail(task: dict[str, Any]) -> str:
    lines = [f"task {task['name']}: queue {task['queue'] or '-'}"]
    if task["environment_queue"]:
        lines.append(f"  environment queue: {task['environment_queue']}")
    for container in task["containers"]:
        requests = ", ".join(f"{k}={v}" for k, v in container["resources"].items())
        if container.get("gpu") is not None:
            requests += f", gpu={container['gpu']}"
        lines.append(f"  container {container['name']}: {requests or 'no requests'}")
    if task["environment"]:
        lines.append(f"  runs in environment {task['environment']}")
    if task["max_queued_time"]:
        lines.append(f"  max queued time: {task['max_queued_time']}")
    return "\n".join(lines)


def task_table(tasks: list[dict[str, Any]]) -> str:
    lines = [f"{'NAME':<24} {'QUEUE':<16} {'ENV QUEUE':<16} RUNS IN"]
    for task in tasks:
        runs_in = task["environment"] or f"{len(task['containers'])} container(s)"
        lines.append(
            f"{task['name']:<24} {task['queue'] or '-':<16} {task['environment_queue'] or '-':<16}"
            f" {runs_in}"
        )
    return "\n".join(lines)


@click.command("task")
@click.argument("name")
@click.option("--queue", help="Where its submissions go unless their run or invocation says.")
@click.option("--environment-queue", help="The queue of the task environment it belongs to.")
@click.option("--resources", multiple=True, metavar="NAME=QUANTITY", help="cpu=2, memory=8Gi.")
@click.option("--gpu", help="Accelerators: H100:4 or T4 (typed), 2 (untyped NVIDIA GPUs).")
@click.option("--node-selector", multiple=True, metavar="LABEL=VALUE", help="Node labels.")
@click.option("--environment", help="Run in this reusable environment (no containers).")
@click.option("--max-queued-time", help="Fail if not scheduled within this time (30m, 1h).")
@OUTPUT
@pass_remote
def create_task(
    remote: Remote,
    name: str,
    queue: str | None,
    environment_queue: str | None,
    output: str,
    **options: Any,
) -> None:
    """Store task template NAME: one container (or a reusable environment) and its queue.

    \b
    sluice create task train --resources cpu=8 --gpu H100:1 --queue gpu-pool
    sluice create task preprocess --resources cpu=1 --environment-queue default-pool
    """
    (spec,) = action_specs(None, 1, **options)
    body = {"name": name, **spec}
    if queue is not None:
        body["queue"] = queue
    if environment_queue is not None:
        body["environment_queue"] = environment_queue
    emit(remote.client.json(Tasks.create(body)), output, task_detail)


@click.command("task")
@click.argument("name")
@OUTPUT
@pass_remote
def get_task(remote: Remote, name: str, output: str) -> None:
    """One task template."""
    emit(Task.get(name, client=remote.client), output, task_detail)


@click.command("tasks")
@OUTPUT
@pass_remote
def get_tasks(remote: Remote, output: str) -> None:
    """Every task template, by name."""
    emit(Task.list(client=remote.client), output, task_table)


@click.command("task")
@click.argument("name")
@pass_remote
def delete_task(remote: Remote, name: str) -> None:
    """Delete task template NAME; actions submitted from it stay as they are."""
    Task.delete(name, client=remote.client)
    click.echo(f"task {name} deleted")
