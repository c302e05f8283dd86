"""`sluice` commands for quota-managed job queues, their shares and jobs.

    sluice create scheduling-policy quota-policy
    sluice create service-environment sagemaker-g5 --capacity-limit ml.g5.xlarge=3
    sluice create job-queue training --scheduling-policy quota-policy \\
        --service-environment sagemaker-g5 \\
        --share project-a:LEND_AND_BORROW:ml.g5.xlarge=1 \\
        --share project-b:LEND:ml.g5.xlarge=1 --share project-c:RESERVE:ml.g5.xlarge=1
    sluice get job-queue training          shares with usage, lent, borrowed and line
    sluice submit-job --job-queue training --share project-a --instance-type ml.g5.xlarge

api.cli.main hangs these on its verb groups (`create job-queue`, `get job`, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml

from api.calls import SchedulingPolicies, ServiceEnvironments
from api.cli.context import OUTPUT, Remote, emit, pass_remote
from api.client import Job as JobClient
from api.client import JobQueue, QuotaShare, SchedulingPolicy, ServiceEnvironment, SluiceClient
from models.errors import InvalidInput
from models.quota import QueueState, ShareStrategy
from models.quota_result import QuotaTickResult
from models.scenario import read_yaml

STATE = click.Choice([state.value for state in QueueState])
SHARE_HELP = (
    "A quota share NAME:STRATEGY:TYPE=N[,TYPE=N...][:borrow-limit=PCT][:in-share-preemption],"
    " e.g. project-a:LEND_AND_BORROW:ml.g5.xlarge=1:borrow-limit=100 (repeat for several)."
)
JOB_STATES = ["QUEUED", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]


# -- option parsing --------------------------------------------------------------------------


def _limits(text: str, option: str) -> dict[str, int]:
    """`ml.g5.xlarge=1,ml.p3.2xlarge=2` -> {type: count}; the server checks the types."""
    limits: dict[str, int] = {}
    for pair in text.split(","):
        name, sep, count = pair.partition("=")
        if not sep or not name.strip() or not count.strip().isdigit():
            raise InvalidInput(
                f"{option}: expected TYPE=COUNT (ml.g5.xlarge=3), got {pair!r}", field=option
            )
        limits[name.strip()] = int(count)
    return limits


def parse_share(text: str) -> dict[str, Any]:
    """One --share value as a QuotaShare body (see SHARE_HELP)."""
    parts = text.split(":")
    strategies = ", ".join(s.value for s in ShareStrategy)
    if len(parts) < 3 or not parts[0]:
        raise InvalidInput(f"--share: expected NAME:STRATEGY:TYPE=N, got {text!r}", field="--share")
    name, strategy, limits, *extras = parts
    if strategy.upper() not in {s.value for s in ShareStrategy}:
        raise InvalidInput(
            f"--share {name}: strategy {strategy!r} is not one of {strategies}", field="--share"
        )
    share: dict[str, Any] = {
        "name": name,
        "strategy": strategy.upper(),
        "capacity_limits": _limits(limits, f"--share {name}"),
    }
    for extra in extras:
        key, _, value = extra.partition("=")
        if key == "borrow-limit" and value.lstrip("-").isdigit():
            share["borrow_limit"] = int(value)
        elif key == "in-share-preemption" and not value:
            share["in_share_preemption"] = True
        else:
            raise InvalidInput(
                f"--share {name}: unknown part {extra!r} (borrow-limit=PCT, in-share-preemption)",
                field="--share",
            )
    return share


# -- text views ------------------------------------------------------------------------------


def _format_counts(amounts: dict[str, int]) -> str:
    return ", ".join(f"{kind} {count}" for kind, count in amounts.items()) or "-"


def job_queue_detail(queue: dict[str, Any]) -> str:
    """One job queue: status, the environment's use, and per share and type its limit,
    use, borrowed, lent and line; then what the last tick started and preempted."""
    lines = [
        f"job queue {queue['name']}: {queue['state']}, {queue['status']} ({queue['reason']})",
        f"  scheduling policy {queue['scheduling_policy']}, service environment"
        f" {queue['service_environment']}",
    ]
    for kind, most in queue["max_capacity"].items():
        used, unassigned = queue["usage"].get(kind, 0), queue["unassigned_used"].get(kind, 0)
        lines.append(f"  {kind}: {used}/{most} in use ({unassigned} of unassigned capacity)")
    header = ("SHARE", "STRATEGY", "TYPE", "LIMIT", "USED", "BORROWED", "LENT", "BORROW LIMIT")
    rows = [header]
    for share in queue["shares"]:
        borrow = share["borrow_limit"]
        borrow_text = (
            "-"
            if share["strategy"] != "LEND_AND_BORROW"
            else "none"
            if borrow is None
            else f"{borrow}%"
        )
        for kind in sorted(share["capacity_limits"].keys() | share["usage"].keys()):
            rows.append(
                (
                    share["name"],
                    share["strategy"],
                    kind,
                    str(share["capacity_limits"].get(kind, 0)),
                    str(share["usage"].get(kind, 0)),
                    str(share["borrowed"].get(kind, 0)),
                    str(share["lent"].get(kind, 0)),
                    borrow_text,
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += [
        ("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]
    lines.append("lines")
    for share in queue["shares"]:
        preemption = "in-share preemption on" if share["in_share_preemption"] else ""
        lines.append(
            f"  {share['name']}: {share['queued']} queued, {share['scheduled']} scheduled,"
            f" {share['starting']} starting, {share['running']} running"
            f"{'; ' + preemption if preemption else ''}"
            f"{'; next: ' + ', '.join(share['line'][:5]) if share['line'] else ''}"
        )
    if queue["scheduled"]:
        started = ", ".join(f"{s['job']} ({s['share']})" for s in queue["scheduled"])
        lines.append(f"started by the last tick: {started}")
    for stop in queue["preempted"]:
        lines.append(
            f"PREEMPTED {stop['job']} ({stop['share']}): {stop['reason']}"
            f"{', for ' + stop['beneficiary'] if stop['beneficiary'] else ''}; back in line at"
            f" {stop['position']}: {stop['message']}"
        )
    lines.append(f"usage as of {queue['as_of'] or 'no tick yet'}")
    return "\n".join(lines)


def job_queue_table(queues: list[dict[str, Any]]) -> str:
    lines = [f"{'NAME':<20} {'STATE':<9} {'STATUS':<8} {'SHARES':>6}  USED/MAX  REASON"]
    for queue in queues:
        use = ", ".join(
            f"{kind} {queue['usage'].get(kind, 0)}/{most}"
            for kind, most in queue["max_capacity"].items()
        )
        lines.append(
            f"{queue['name']:<20} {queue['state']:<9} {queue['status']:<8}"
            f" {len(queue['shares']):>6}  {use}  {queue['reason']}"
        )
    return "\n".join(lines)


def job_detail(job: dict[str, Any]) -> str:
    lines = [
        f"job {job['id']}: {job['state']} in {job['job_queue']}/{job['share']},"
        f" {job['count']} x {job['instance_type']}, priority {job['priority']}",
        f"  submitted {job['submitted_at']}"
        + (f", scheduled {job['scheduled_at']}" if job["scheduled_at"] else ""),
    ]
    if job["position"] is not None:
        lines.append(f"  place in its share's line: {job['position']}")
    if job["waiting_reason"]:
        lines.append(f"  waiting: {job['waiting_reason']}: {job['waiting_message']}")
    last = job["last_preemption"]
    if last:
        lines.append(
            f"  preempted {job['preemptions']}x; last at {last['at']}: {last['reason']}"
            f"{', for ' + last['beneficiary'] if last['beneficiary'] else ''}: {last['message']}"
        )
    if job["code"] or job["message"]:
        lines.append(f"  {job['code'] or job['state']}: {job['message']}")
    return "\n".join(lines)


def quota_summary(result: QuotaTickResult) -> str:
    """The job queues' part of a tick, for `sluice solve`."""
    lines = [
        f"job queues: {len(result.scheduled)} scheduled, {len(result.preempted)} preempted,"
        f" {len(result.failed)} failed, {len(result.waiting)} waiting"
    ]
    for start in result.scheduled:
        lines.append(f"  scheduled {start.job} ({start.job_queue}/{start.share})")
    for stop in result.preempted:
        lines.append(
            f"  preempted {stop.job} ({stop.job_queue}/{stop.share}): {stop.reason.value}"
            f"{', for ' + stop.beneficiary if stop.beneficiary else ''}; back in line at"
            f" {stop.position}"
        )
    for failure in result.failed:
        lines.append(f"  failed {failure.job}: {failure.code.value}: {failure.message}")
    for waiting in result.waiting:
        lines.append(f"  waiting {waiting.job}: {waiting.reason.value}: {waiting.message}")
    for queue in result.job_queues.values():
        for share in queue.shares.values():
            lines.append(
                f"  {queue.name}/{share.name} ({share.strategy.value}): used"
                f" {_format_counts(share.usage)}; borrowed {_format_counts(share.borrowed)};"
                f" lent {_format_counts(share.lent)}"
            )
    return "\n".join(lines)


# -- commands --------------------------------------------------------------------------------


@click.command("scheduling-policy")
@click.argument("name")
@click.option(
    "--no-quota-share-policy",
    is_flag=True,
    help="Without a quota share policy (such a policy cannot serve quota shares).",
)
@pass_remote
def create_scheduling_policy(remote: Remote, name: str, no_quota_share_policy: bool) -> None:
    """Create or replace scheduling policy NAME (quota share policy FIFO by default)."""
    policy = SchedulingPolicy.put(
        name, quota_share_policy=not no_quota_share_policy, client=remote.client
    )
    click.echo(yaml.safe_dump(policy, sort_keys=False).rstrip())


@click.command("service-environment")
@click.argument("name")
@click.option(
    "--capacity-limit",
    "limits",
    multiple=True,
    required=True,
    metavar="TYPE=COUNT",
    help="Most instances of one type (ml.g5.xlarge=3); repeat for several.",
)
@pass_remote
def create_service_environment(remote: Remote, name: str, limits: tuple[str, ...]) -> None:
    """Create or replace service environment NAME (SAGEMAKER_TRAINING).

    Lowering a limit makes jobs above it eligible for preemption at the next tick.
    """
    capacity = _limits(",".join(limits), "--capacity-limit")
    environment = ServiceEnvironment.put(name, capacity, client=remote.client)
    click.echo(yaml.safe_dump(environment, sort_keys=False).rstrip())


@click.command("job-queue")
@click.argument("name", required=False)
@click.option("--scheduling-policy", help="A policy with a quota share policy.")
@click.option("--service-environment", help="The capacity the queue runs on (one queue each).")
@click.option("--share", "shares", multiple=True, metavar="SPEC", help=SHARE_HELP)
@click.option("--state", type=STATE, help="ENABLED (default) or DISABLED.")
@click.option(
    "-f",
    "--file",
    "path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="YAML/JSON job queue (a scenario file's job_queues entry).",
)
@OUTPUT
@pass_remote
def create_job_queue(
    remote: Remote,
    name: str | None,
    scheduling_policy: str | None,
    service_environment: str | None,
    shares: tuple[str, ...],
    state: str | None,
    path: Path | None,
    output: str,
) -> None:
    """Create job queue NAME with 1 to 20 quota shares; it must be VALID.

    \b
    sluice create job-queue training --scheduling-policy quota-policy \\
      --service-environment sagemaker-g5 \\
      --share project-a:LEND_AND_BORROW:ml.g5.xlarge=1 \\
      --share project-b:LEND:ml.g5.xlarge=1 --share project-c:RESERVE:ml.g5.xlarge=1
    sluice create job-queue -f training.yaml
    """
    client = remote.client
    if path is not None:
        data = read_yaml(path)
        if not isinstance(data, dict):
            raise InvalidInput(f"{path}: expected a mapping with a job queue's fields")
        data = {**data, **({"name": name} if name else {})}
        JobQueue.put(data, client=client)
        emit(JobQueue.details(data["name"], client=client), output, job_queue_detail)
        return
    if not name or not scheduling_policy or not service_environment or not shares:
        raise InvalidInput(
            "give NAME, --scheduling-policy, --service-environment and at least one --share"
            " (or -f FILE)"
        )
    queue = JobQueue.create(
        name,
        scheduling_policy=scheduling_policy,
        service_environment=service_environment,
        quota_shares=[parse_share(share) for share in shares],
        state=state,
        client=client,
    )
    emit(queue, output, job_queue_detail)


@click.command("job-queue")
@click.argument("name")
@click.option("--state", type=STATE, help="DISABLED: start nothing new; ENABLED again.")
@click.option("--scheduling-policy", help="Use this scheduling policy instead.")
@click.option("--service-environment", help="Run on this service environment instead.")
@click.option("--share", "shares", multiple=True, metavar="SPEC", help=SHARE_HELP)
@click.option("--remove-share", "removed", multiple=True, metavar="NAME", help="Drop a share.")
@OUTPUT
@pass_remote
def update_job_queue(
    remote: Remote,
    name: str,
    state: str | None,
    scheduling_policy: str | None,
    service_environment: str | None,
    shares: tuple[str, ...],
    removed: tuple[str, ...],
    output: str,
) -> None:
    """Change a live job queue; --share adds a share or replaces the one of its name.

    \b
    sluice update job-queue training --share project-b:LEND:ml.g5.xlarge=0
    sluice update job-queue training --state DISABLED
    """
    client = remote.client
    if not (state or scheduling_policy or service_environment or shares or removed):
        raise InvalidInput("nothing to change: give at least one option (see --help)")
    queue: dict[str, Any] | None = None
    if state or scheduling_policy or service_environment:
        queue = JobQueue.update(
            name,
            state=state,
            scheduling_policy=scheduling_policy,
            service_environment=service_environment,
            client=client,
        )
    for spec in shares:
        share = parse_share(spec)
        share_name = share.pop("name")
        queue = QuotaShare.put(name, share_name, client=client, **share)
    for share_name in removed:
        QuotaShare.delete(name, share_name, client=client)
    if removed:
        queue = JobQueue.details(name, client=client)
    emit(queue, output, job_queue_detail)


@click.command("job-queue")
@click.argument("name", required=False)
@OUTPUT
@pass_remote
def get_job_queue(remote: Remote, name: str | None, output: str) -> None:
    """One job queue with its shares' usage, lent, borrowed and line, or every job queue.

    \b
    sluice get job-queue training
    sluice get job-queue
    """
    client = remote.client
    if name:
        emit(JobQueue.details(name, client=client), output, job_queue_detail)
    else:
        emit(JobQueue.list(client=client), output, job_queue_table)


def _delete_command(noun: str, delete: Callable[..., None], in_use: str) -> click.Command:
    """`sluice delete NOUN NAME`: one command per kind of quota configuration."""

    @click.command(noun, help=f"Delete {noun} NAME; refused while {in_use}.")
    @click.argument("name")
    @pass_remote
    def command(remote: Remote, name: str) -> None:
        delete(name, client=remote.client)
        click.echo(f"{noun} {name} deleted")

    return command


delete_job_queue = _delete_command(
    "job-queue", JobQueue.delete, "it holds live jobs (disable it and let them finish)"
)
delete_scheduling_policy = _delete_command(
    "scheduling-policy", SchedulingPolicy.delete, "a job queue uses it"
)
delete_service_environment = _delete_command(
    "service-environment", ServiceEnvironment.delete, "a job queue runs on it"
)


@click.command("submit-job")
@click.option("--job-queue", required=True, help="The quota-managed job queue.")
@click.option("--share", required=True, help="The quota share whose line it joins.")
@click.option("--instance-type", required=True, help="A SageMaker Training type: ml.g5.xlarge.")
@click.option("--count", type=click.IntRange(min=1), help="Instances [default: 1].")
@click.option("--priority", type=click.IntRange(0, 9999), help="Higher first [default: 0].")
@click.option("--id", "job_id", help="The job's id [default: made by the server].")
@click.option("--wait", is_flag=True, help="Wait until scheduled; a failure is the exit status.")
@pass_remote
def submit_job(
    remote: Remote,
    job_queue: str,
    share: str,
    instance_type: str,
    count: int | None,
    priority: int | None,
    job_id: str | None,
    wait: bool,
) -> None:
    """Queue one job in a quota share's line; prints its id.

    \b
    sluice submit-job --job-queue training --share project-a --instance-type ml.g5.xlarge
    """
    client = remote.client
    job = JobClient.submit(
        job_queue=job_queue,
        share=share,
        instance_type=instance_type,
        count=count,
        priority=priority,
        id=job_id,
        client=client,
    )
    click.echo(job["id"])
    if wait:
        job = JobClient.wait(job["id"], client=client)
        click.echo(f"{job['id']}: {job['state']}", err=True)


@click.command("job")
@click.argument("job_id")
@OUTPUT
@pass_remote
def get_job(remote: Remote, job_id: str, output: str) -> None:
    """One job: state, place in line, why it waits, its last preemption."""
    emit(JobClient.get(job_id, client=remote.client), output, job_detail)


@click.command("jobs")
@click.option("--job-queue", help="Only this job queue.")
@click.option("--share", help="Only this share.")
@click.option("--state", type=click.Choice(JOB_STATES), help="Only jobs in this state.")
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=50,
    show_default=True,
    help="List at most this many jobs.",
)
@OUTPUT
@pass_remote
def get_jobs(
    remote: Remote,
    job_queue: str | None,
    share: str | None,
    state: str | None,
    limit: int,
    output: str,
) -> None:
    """Jobs in arrival order."""
    jobs = JobClient.list(
        job_queue=job_queue, share=share, state=state, limit=limit, client=remote.client
    )

    def table(rows: list[dict[str, Any]]) -> str:
        lines = [f"{'ID':<28} {'QUEUE/SHARE':<28} {'STATE':<10} DETAIL"]
        for job in rows:
            last = job["last_preemption"]
            detail = job["waiting_reason"] or job["code"] or ""
            if last and job["state"] == "QUEUED":
                detail = f"{detail} (preempted: {last['reason']})".strip()
            where = f"{job['job_queue']}/{job['share']}"
            lines.append(f"{job['id']:<28} {where:<28} {job['state']:<10} {detail}")
        return "\n".join(lines)

    emit(jobs, output, table)


@click.command("job")
@click.argument("job_id")
@pass_remote
def cancel_job(remote: Remote, job_id: str) -> None:
    """Cancel a job; if it held instances they are freed."""
    job = JobClient.cancel(job_id, client=remote.client)
    click.echo(f"{job['id']}: {job['state']}")


def apply_quota(data: dict[str, Any], client: SluiceClient) -> list[str]:
    """Put a scenario file's scheduling policies, service environments and job queues;
    one line per object saying what happened (jobs are not submitted)."""
    done = []
    for policy in data.get("scheduling_policies") or []:
        client.json(SchedulingPolicies.put_from(policy))
        done.append(f"scheduling policy {policy['name']} put")
    for environment in data.get("service_environments") or []:
        client.json(ServiceEnvironments.put_from(environment))
        done.append(f"service environment {environment['name']} put")
    for queue in data.get("job_queues") or []:
        done.append(f"job queue {queue['name']} {JobQueue.put(queue, client=client)}")
    return done
