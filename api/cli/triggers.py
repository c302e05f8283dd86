"""`sluice` commands for triggers: scheduled runs sent to a queue.

    sluice create trigger nightly --cron "0 2 * * *" --queue batch --resources cpu=4
    sluice create trigger poll --every 10m --queue batch --environment embedder
    sluice get triggers
    sluice get trigger nightly          schedule, next time and the history of firings
    sluice pause trigger nightly        (and `sluice resume trigger nightly`)

Each firing submits the trigger's actions (the submit flags: `--resources`, `--gpu`, ...,
`--count`, `-f`) as one new run. api.cli.main hangs these on its verb groups.
"""

from __future__ import annotations

from typing import Any

import click

from api.cli.context import OUTPUT, Remote, emit, pass_remote
from api.cli.queues import action_options, action_specs
from api.client import Cron, FixedRate
from api.client import Trigger as TriggerClient
from models.errors import InvalidInput

CATCH_UP = click.Choice(["one", "none"])


def _schedule(cron: str | None, timezone: str | None, every: str | None) -> Cron | FixedRate:
    if (cron is None) == (every is None):
        raise InvalidInput("give one of --cron or --every")
    if every is not None:
        if timezone is not None:
            raise InvalidInput("--timezone: only a --cron schedule has a time zone")
        return FixedRate(every)
    assert cron is not None
    return Cron(cron, timezone)


def trigger_detail(trigger: dict[str, Any]) -> str:
    lines = [
        f"trigger {trigger['name']}: {trigger['schedule']} -> queue {trigger['queue']}"
        f" ({trigger['state']}, catch-up {trigger['catch_up']})",
        f"  next: {trigger['next_due'] or '-'}",
        f"  each run: {len(trigger['actions'])} action(s)",
    ]
    history = trigger["history"]
    lines.append("  history:" if history else "  history: no firings yet")
    for firing in history:
        run = f" run {firing['run']}" if firing["run"] else ""
        lines.append(f"    {firing['scheduled_for']} {firing['outcome']}{run}: {firing['message']}")
    return "\n".join(lines)


def trigger_table(triggers: list[dict[str, Any]]) -> str:
    lines = [f"{'NAME':<24} {'SCHEDULE':<32} {'QUEUE':<16} {'STATE':<7} {'NEXT':<26} LAST"]
    for trigger in triggers:
        last = trigger["history"][0] if trigger["history"] else None
        lines.append(
            f"{trigger['name']:<24} {trigger['schedule']:<32} {trigger['queue']:<16}"
            f" {trigger['state']:<7} {trigger['next_due'] or '-':<26}"
            f" {last['outcome'] + ' ' + (last['run'] or '') if last else '-'}"
        )
    return "\n".join(lines)


@click.command("trigger")
@click.argument("name")
@click.option("--cron", help='A cron expression: "0 2 * * *" (minute hour day month weekday).')
@click.option("--timezone", help="The cron expression's time zone [default: UTC].")
@click.option("--every", help="A fixed rate instead of --cron: 10m, 1h, 30s.")
@click.option("--queue", help="Where its runs go [default: the default queue].")
@click.option(
    "--catch-up",
    type=CATCH_UP,
    help="Times missed while the service was down: one run (default), or none.",
)
@click.option("--paused", is_flag=True, help="Create it paused.")
@click.option("--deadline", help="Fail a run's action if not done this long after the firing.")
@action_options
@OUTPUT
@pass_remote
def create_trigger(
    remote: Remote,
    name: str,
    cron: str | None,
    timezone: str | None,
    every: str | None,
    queue: str | None,
    catch_up: str | None,
    paused: bool,
    deadline: str | None,
    output: str,
    **options: Any,
) -> None:
    """Create trigger NAME: at each time of its schedule, submit its actions as a new run.

    \b
    sluice create trigger nightly --cron "0 2 * * *" --queue batch --resources cpu=4
    sluice create trigger nightly --cron "0 2 * * *" --timezone Europe/Amsterdam --queue batch
    sluice create trigger poll --every 10m --queue runs-1 --environment embedder
    """
    trigger = TriggerClient(
        name,
        _schedule(cron, timezone, every),
        queue=queue,
        actions=action_specs(deadline=deadline, **options),
        catch_up=catch_up,
        paused=paused or None,
    )
    emit(trigger.create(client=remote.client), output, trigger_detail)


@click.command("trigger")
@click.argument("name")
@click.option("--cron", help="A new cron schedule (replaces the schedule).")
@click.option("--timezone", help="The cron expression's time zone.")
@click.option("--every", help="A new fixed rate (replaces the schedule).")
@click.option("--queue", help="Send its runs to this queue (rights on both queues).")
@click.option("--catch-up", type=CATCH_UP, help="Times missed while down: one run, or none.")
@OUTPUT
@pass_remote
def update_trigger(
    remote: Remote,
    name: str,
    cron: str | None,
    timezone: str | None,
    every: str | None,
    queue: str | None,
    catch_up: str | None,
    output: str,
) -> None:
    """Change trigger NAME; a new schedule plans its next time again from now.

    \b
    sluice update trigger nightly --cron "30 3 * * *"
    sluice update trigger nightly --queue batch-2
    """
    schedule = None if cron is None and every is None else _schedule(cron, timezone, every)
    if schedule is None and timezone is None and queue is None and catch_up is None:
        raise InvalidInput("nothing to change: give at least one option (see --help)")
    trigger = TriggerClient.update(
        name,
        schedule=schedule,
        timezone=timezone if schedule is None else None,
        queue=queue,
        catch_up=catch_up,
        client=remote.client,
    )
    emit(trigger, output, trigger_detail)


@click.command("trigger")
@click.argument("name", required=False)
@OUTPUT
@pass_remote
def get_trigger(remote: Remote, name: str | None, output: str) -> None:
    """One trigger with its history of firings, or every trigger in a table."""
    if name:
        emit(TriggerClient.get(name, client=remote.client), output, trigger_detail)
    else:
        emit(TriggerClient.list(client=remote.client), output, trigger_table)


@click.command("triggers")
@OUTPUT
@pass_remote
def get_triggers(remote: Remote, output: str) -> None:
    """Every trigger: schedule, queue, state, next time and last firing."""
    emit(TriggerClient.list(client=remote.client), output, trigger_table)


@click.command("trigger")
@click.argument("name")
@pass_remote
def pause_trigger(remote: Remote, name: str) -> None:
    """No firing until resumed; times passing meanwhile are not caught up."""
    TriggerClient.pause(name, client=remote.client)
    click.echo(f"trigger {name} paused")


@click.command("trigger")
@click.argument("name")
@pass_remote
def resume_trigger(remote: Remote, name: str) -> None:
    """Fire again from the next scheduled time after now."""
    trigger = TriggerClient.resume(name, client=remote.client)
    click.echo(f"trigger {name} resumed; next {trigger['next_due']}")


@click.command("trigger")
@click.argument("name")
@pass_remote
def delete_trigger(remote: Remote, name: str) -> None:
    """Delete trigger NAME and its history; the runs it submitted stay."""
    TriggerClient.delete(name, client=remote.client)
    click.echo(f"trigger {name} deleted")
