"""The `sluice` command line: the root group, its verb groups and where each command hangs.

Commands that talk to a server read its address and token from --url/--token
or SLUICE_URL/SLUICE_TOKEN. Errors go to stderr as `CODE: message` with exit
status 1, never as a traceback (api.cli.context).

The commands live in modules by capability (api.cli.queues, job_queues, service,
whatif, explain); this module only places them. Installed packages add commands of
their own as entry points of the group `sluice.commands` (bench adds `sluice bench`).
"""

from __future__ import annotations

from importlib.metadata import entry_points

import click

from api.cli import job_queues, queues, tasks, triggers
from api.cli.context import Remote, SluiceGroup
from api.cli.explain import explain_command
from api.cli.service import serve, solve_scenario
from api.cli.whatif import snapshot_group, whatif
from api.client import DEFAULT_URL

COMMAND_ENTRY_POINTS = "sluice.commands"


@click.group(cls=SluiceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url", envvar="SLUICE_URL", help=f"Server address [env SLUICE_URL; default {DEFAULT_URL}]."
)
@click.option("--token", envvar="SLUICE_TOKEN", help="Bearer token [env SLUICE_TOKEN].")
@click.version_option(package_name="sluice")
@click.pass_context
def main(ctx: click.Context, url: str | None, token: str | None) -> None:
    """Sluice: capped queues and resource-aware placement, decided once per tick.

    Start a server with `sluice serve --demo`, then watch it with
    `sluice get queue --watch`.
    """
    if ctx.obj is None:  # tests pass a Remote of their own
        ctx.obj = Remote(url, token)


@main.group()
def create() -> None:
    """Create a resource."""


@main.group()
def update() -> None:
    """Change a resource."""


@main.group()
def get() -> None:
    """Show resources."""


@main.group()
def drain() -> None:
    """Stop a queue accepting work."""


@main.group()
def delete() -> None:
    """Delete a resource."""


@main.group()
def cancel() -> None:
    """Cancel work."""


@main.group()
def move() -> None:
    """Move waiting work to another queue."""


@main.group()
def pause() -> None:
    """Pause a trigger."""


@main.group()
def resume() -> None:
    """Resume a paused trigger."""


def _add_commands() -> None:
    """Every command of this package on its group, then those of installed packages."""
    places: tuple[tuple[click.Group, tuple[click.Command, ...]], ...] = (
        (
            main,
            (
                queues.submit,
                queues.apply,
                job_queues.submit_job,
                serve,
                solve_scenario,
                whatif,
                snapshot_group,
                explain_command,
            ),
        ),
        (
            create,
            (
                queues.create_queue,
                job_queues.create_job_queue,
                job_queues.create_scheduling_policy,
                job_queues.create_service_environment,
                triggers.create_trigger,
                tasks.create_task,
            ),
        ),
        (
            update,
            (
                queues.update_queue,
                job_queues.update_job_queue,
                queues.update_settings,
                triggers.update_trigger,
            ),
        ),
        (
            get,
            (
                queues.get_queue,
                queues.get_action,
                queues.get_actions,
                queues.get_cluster,
                queues.get_settings,
                job_queues.get_job_queue,
                job_queues.get_job,
                job_queues.get_jobs,
                triggers.get_trigger,
                triggers.get_triggers,
                tasks.get_task,
                tasks.get_tasks,
            ),
        ),
        (drain, (queues.drain_queue,)),
        (
            delete,
            (
                queues.delete_queue,
                job_queues.delete_job_queue,
                job_queues.delete_scheduling_policy,
                job_queues.delete_service_environment,
                triggers.delete_trigger,
                tasks.delete_task,
            ),
        ),
        (cancel, (queues.cancel_action, job_queues.cancel_job)),
        (move, (queues.move_action, queues.move_queue)),
        (pause, (triggers.pause_trigger,)),
        (resume, (triggers.resume_trigger,)),
    )
    for group, commands in places:
        for command in commands:
            group.add_command(command)
    for entry in entry_points(group=COMMAND_ENTRY_POINTS):
        main.add_command(entry.load(), entry.name)


_add_commands()
