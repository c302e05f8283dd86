"""The `sluice` command line: the root group, its verb groups and where each command hangs.

Commands that talk to a server read its address and token from --url/--token
or SLUICE_URL/SLUICE_TOKEN. Errors go to stderr as `CODE: message` with exit
status 1, never as a traceback (api.cli.context).

The commands live in modules by capability (api.cli.queues, job_queues, service,
whatif, explain, triggers, imports); this module only places them, one line each in
PLACES, imported when they run. Installed packages add commands of
their own as entry points of the group `sluice.commands` (bench adds `sluice bench`).
"""

from __future__ import annotations

from importlib.metadata import entry_points

import click

from api.cli.context import Remote, SluiceGroup
from api.cli.lazy import LazyGroup

# api.client.DEFAULT_URL, spelled out so that `sluice --help` need not import httpx
# (tests/api/test_cli_tree.py checks they agree).
SHOWN_DEFAULT_URL = "http://127.0.0.1:8000"

COMMAND_ENTRY_POINTS = "sluice.commands"


@click.group(cls=SluiceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="SLUICE_URL",
    help=f"Server address [env SLUICE_URL; default {SHOWN_DEFAULT_URL}].",
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


@main.group(cls=LazyGroup)
def create() -> None:
    """Create a resource."""


@main.group(cls=LazyGroup)
def update() -> None:
    """Change a resource."""


@main.group(cls=LazyGroup)
def get() -> None:
    """Show resources."""


@main.group(cls=LazyGroup)
def drain() -> None:
    """Stop a queue accepting work."""


@main.group(cls=LazyGroup)
def delete() -> None:
    """Delete a resource."""


@main.group(cls=LazyGroup)
def cancel() -> None:
    """Cancel work."""


@main.group(cls=LazyGroup)
def move() -> None:
    """Move waiting work to another queue."""


@main.group(cls=LazyGroup)
def pause() -> None:
    """Pause a trigger."""


@main.group(cls=LazyGroup)
def resume() -> None:
    """Resume a paused trigger."""


@main.group("import", cls=LazyGroup)
def import_group() -> None:
    """Turn other systems' descriptions into Sluice resources."""


# Where each command hangs: (name, "module:function"), one line per command. The module is
# imported only when the command runs (api.cli.lazy), so `sluice --help` stays fast.
PLACES: dict[click.Group, tuple[tuple[str, str], ...]] = {
    main: (
        ("submit", "api.cli.queues:submit"),
        ("apply", "api.cli.queues:apply"),
        ("submit-job", "api.cli.job_queues:submit_job"),
        ("serve", "api.cli.service:serve"),
        ("solve", "api.cli.service:solve_scenario"),
        ("whatif", "api.cli.whatif:whatif"),
        ("snapshot", "api.cli.whatif:snapshot_group"),
        ("explain", "api.cli.explain:explain_command"),
        ("replay", "api.cli.replay:replay_group"),
    ),
    create: (
        ("queue", "api.cli.queues:create_queue"),
        ("job-queue", "api.cli.job_queues:create_job_queue"),
        ("scheduling-policy", "api.cli.job_queues:create_scheduling_policy"),
        ("service-environment", "api.cli.job_queues:create_service_environment"),
        ("trigger", "api.cli.triggers:create_trigger"),
        ("task", "api.cli.tasks:create_task"),
    ),
    update: (
        ("queue", "api.cli.queues:update_queue"),
        ("job-queue", "api.cli.job_queues:update_job_queue"),
        ("settings", "api.cli.queues:update_settings"),
        ("trigger", "api.cli.triggers:update_trigger"),
    ),
    get: (
        ("queue", "api.cli.queues:get_queue"),
        ("action", "api.cli.queues:get_action"),
        ("actions", "api.cli.queues:get_actions"),
        ("cluster", "api.cli.queues:get_cluster"),
        ("settings", "api.cli.queues:get_settings"),
        ("job-queue", "api.cli.job_queues:get_job_queue"),
        ("job", "api.cli.job_queues:get_job"),
        ("jobs", "api.cli.job_queues:get_jobs"),
        ("trigger", "api.cli.triggers:get_trigger"),
        ("triggers", "api.cli.triggers:get_triggers"),
        ("task", "api.cli.tasks:get_task"),
        ("tasks", "api.cli.tasks:get_tasks"),
    ),
    drain: (("queue", "api.cli.queues:drain_queue"),),
    delete: (
        ("queue", "api.cli.queues:delete_queue"),
        ("job-queue", "api.cli.job_queues:delete_job_queue"),
        ("scheduling-policy", "api.cli.job_queues:delete_scheduling_policy"),
        ("service-environment", "api.cli.job_queues:delete_service_environment"),
        ("trigger", "api.cli.triggers:delete_trigger"),
        ("task", "api.cli.tasks:delete_task"),
    ),
    cancel: (
        ("action", "api.cli.queues:cancel_action"),
        ("job", "api.cli.job_queues:cancel_job"),
    ),
    move: (
        ("action", "api.cli.queues:move_action"),
        ("queue", "api.cli.queues:move_queue"),
    ),
    pause: (("trigger", "api.cli.triggers:pause_trigger"),),
    resume: (("trigger", "api.cli.triggers:resume_trigger"),),
    import_group: (("kube", "api.cli.imports:import_kube"),),
}


def _place_commands() -> None:
    """Every command of this package on its group, then those of installed packages."""
    for group, commands in PLACES.items():
        if not isinstance(group, LazyGroup):
            raise TypeError(f"group {group.name} must be a LazyGroup to place commands on")
        for name, target in commands:
            group.place(name, target)
    for entry in entry_points(group=COMMAND_ENTRY_POINTS):
        main.place(entry.name, entry.value)


_place_commands()
