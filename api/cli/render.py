"""Text views for the CLI: a queue with a usage bar per cap, the all-queues table, banners."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_core import to_json

from models.errors import InvalidInput
from models.fields import format_duration
from models.limits import MAX_INT64
from models.quantity import format_quantity, parse_quantity
from models.resources import UNTYPED_GPU
from models.result import QueueMetrics, TickResult

BAR_WIDTH = 24


def _amount_or_zero(resource: str, quantity: str | int) -> int:
    try:
        return parse_quantity(resource, quantity, resource, MAX_INT64)
    except InvalidInput:
        return 0


def _short_device(name: str) -> str:
    """`nvidia_gpu/nvidia-h100` -> `nvidia-h100` for narrow columns."""
    return name.split("/", 1)[1] if "/" in name else name


def bar(used: int, cap: int) -> str:
    if cap <= 0:
        filled = BAR_WIDTH if used > 0 else 0
    else:
        filled = min(BAR_WIDTH, round(BAR_WIDTH * used / cap))
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"


def _percent(used: int, cap: int) -> str:
    if cap <= 0:
        return "over cap" if used else "0%"
    text = f"{100 * used / cap:.0f}%"
    return f"{text} over cap" if used > cap else text


def _cap_rows(queue: dict[str, Any]) -> list[tuple[str, int, int, str, str]]:
    """(label, used, cap, used text, cap text) for every cap the queue has."""
    rows = []
    in_flight = queue["in_flight_resources"]
    for resource, cap_text in queue["max_resources"].items():
        used_text = in_flight.get(resource, "0")
        rows.append(
            (
                resource,
                _amount_or_zero(resource, used_text),
                _amount_or_zero(resource, cap_text),
                used_text,
                cap_text,
            )
        )
    charges = queue["accelerator_charges"]
    if queue["max_gpus"] is not None:
        used = charges.get(UNTYPED_GPU, 0)
        rows.append(("gpu (untyped)", used, queue["max_gpus"], str(used), str(queue["max_gpus"])))
    for device, cap in queue["max_accelerators"].items():
        used = charges.get(device, 0)
        rows.append((device, used, cap, str(used), str(cap)))
    return rows


def _limit(used: int, cap: int | None) -> str:
    return f"{used}/{'-' if cap is None else cap}"


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _since(queue: dict[str, Any]) -> str:
    """How long the head has been blocked, by the server's clock when it says."""
    now = _time(queue["as_of"]) if queue.get("as_of") else datetime.now(UTC)
    seconds = max(0, round((now - _time(queue["head_blocked_since"])).total_seconds()))
    return format_duration(timedelta(seconds=seconds))


def blocked_banner(queue: dict[str, Any]) -> str | None:
    """The head-of-line banner of a blocked strict_fifo queue."""
    if not queue["head_blocked"]:
        return None
    head = queue.get("head_action") or "the head of the line"
    behind = queue["blocked_behind_head"]
    return (
        f"!! HEAD OF LINE BLOCKED for {_since(queue)}: {head} does not fit yet;"
        f" {behind} action{'s' if behind != 1 else ''} wait{'' if behind != 1 else 's'} behind it."
        f" To let those that fit run now: sluice update queue {queue['name']}"
        " --scheduling greedy_capacity"
    )


def queue_detail(queue: dict[str, Any]) -> str:
    """One queue: its settings, then a usage bar next to each cap."""
    lines = []
    banner = blocked_banner(queue)
    if banner:
        lines += [banner, ""]
    expired = queue.get("deadline_exceeded")
    if expired:
        lines += [
            f"!! DEADLINE EXCEEDED at the last tick: {', '.join(expired)}; their executors must"
            " stop them",
            "",
        ]
    head = queue.get("head_explanation")
    if head:
        lines += [f"   why {head['action']} waits: {item['message']}" for item in head["items"]]
        lines += [f"   what would let it run: {s['message']}" for s in head["suggestions"]] + [""]
    state = "draining" if queue["draining"] else "accepting"
    lines.append(
        f"queue {queue['name']}  pool {queue['pool']}  {queue['scheduling']}"
        f"  priority {queue['priority']}  {state}"
    )
    clusters = ", ".join(queue["clusters"]) if queue["clusters"] else "all"
    lines.append(f"  clusters          {clusters}")
    lines.append(
        f"  actions running   {_limit(queue['running_actions'], queue['action_concurrency'])}"
        f"   runs active {_limit(queue['active_runs'], queue['run_concurrency'])}"
        f"   depth {_limit(queue['depth_used'], queue['depth'])}"
        f"   waiting {queue['waiting']}"
    )
    rows = _cap_rows(queue)
    if rows:
        lines.append("  caps (scheduled, unfinished requests / cap)")
        width = max(len(label) for label, *_ in rows)
        for label, used, cap, used_text, cap_text in rows:
            lines.append(
                f"    {label:<{width}}  {bar(used, cap)}  {used_text} / {cap_text}"
                f"  {_percent(used, cap)}"
            )
    else:
        lines.append("  caps              none")
    uncapped = [
        f"{resource} {amount}"
        for resource, amount in queue["in_flight_resources"].items()
        if resource not in queue["max_resources"]
    ] + [
        f"{device} {count}"
        for device, count in queue["accelerator_charges"].items()
        if count
        and device not in queue["max_accelerators"]
        and not (device == UNTYPED_GPU and queue["max_gpus"] is not None)
    ]
    if uncapped:
        lines.append("  in use, uncapped  " + ", ".join(uncapped))
    if queue["as_of"]:
        lines.append(f"  as of tick at     {queue['as_of']}")
    return "\n".join(lines)


def _resource_cell(queue: dict[str, Any], resource: str) -> str:
    used = queue["in_flight_resources"].get(resource, "0")
    cap = queue["max_resources"].get(resource)
    return f"{used}/{cap}" if cap else used


def _accelerators_cell(queue: dict[str, Any]) -> str:
    charges, parts = queue["accelerator_charges"], []
    if queue["max_gpus"] is not None or charges.get(UNTYPED_GPU):
        cap = queue["max_gpus"]
        parts.append(f"gpu {charges.get(UNTYPED_GPU, 0)}" + ("" if cap is None else f"/{cap}"))
    devices = sorted(set(queue["max_accelerators"]) | {d for d in charges if d != UNTYPED_GPU})
    for device in devices:
        cap = queue["max_accelerators"].get(device)
        used = charges.get(device, 0)
        if used or cap is not None:
            parts.append(f"{_short_device(device)} {used}" + ("" if cap is None else f"/{cap}"))
    return " ".join(parts) or "-"


QUEUE_COLUMNS = ("NAME", "STATUS", "RUN", "WAIT", "DEPTH", "CPU", "MEMORY", "ACCEL", "POLICY",
                 "POOL")  # fmt: skip
# How the table gives up width when it is wider than the terminal, step by step until it fits:
# (column, the width it shrinks to; None drops it). The settings go first, then the usage
# figures; the name shrinks before STATUS, which is what the table is for.
_FIT_STEPS: tuple[tuple[str, int | None], ...] = (
    ("POOL", len("POOL")), ("POLICY", len("POLICY")), ("POOL", None), ("POLICY", None),
    ("ACCEL", len("ACCEL")), ("MEMORY", len("MEMORY")), ("CPU", len("CPU")),
    ("DEPTH", len("DEPTH")), ("NAME", 16), ("STATUS", len("STATUS")), ("NAME", len("NAME")),
)  # fmt: skip
_GAP = "  "


def queue_table(queues: list[dict[str, Any]], width: int | None = None) -> str:
    """Every queue in one table, STATUS next to the name: a blocked queue is marked BLOCKED
    with how long. Given a `width` (the terminal's), the table shrinks to fit it (_FIT_STEPS):
    a cut cell ends in `…`, no header is cut, POOL and POLICY may go."""
    rows = [QUEUE_COLUMNS]
    for queue in queues:
        status = []
        if queue["head_blocked"]:
            status.append(f"BLOCKED {_since(queue)} ({queue['blocked_behind_head']} behind)")
        if queue["draining"]:
            status.append("draining")
        if queue.get("deadline_exceeded"):
            status.append(f"{len(queue['deadline_exceeded'])} past deadline")
        rows.append(
            (
                queue["name"],
                ", ".join(status) or "ok",
                _limit(queue["running_actions"], queue["action_concurrency"]),
                str(queue["waiting"]),
                _limit(queue["depth_used"], queue["depth"]),
                _resource_cell(queue, "cpu"),
                _resource_cell(queue, "memory"),
                _accelerators_cell(queue),
                queue["scheduling"],
                queue["pool"],
            )
        )
    widths: dict[str, int] = {
        name: max(len(row[i]) for row in rows) for i, name in enumerate(QUEUE_COLUMNS)
    }
    if width is not None:
        for name, floor in _FIT_STEPS:
            excess = sum(widths.values()) + len(_GAP) * (len(widths) - 1) - width
            if excess <= 0:
                break
            if name not in widths:
                continue
            if floor is None:
                del widths[name]
            else:
                widths[name] -= max(0, min(excess, widths[name] - floor))
    kept = [i for i, name in enumerate(QUEUE_COLUMNS) if name in widths]
    return "\n".join(
        _GAP.join(_cell(row[i], widths[QUEUE_COLUMNS[i]]) for i in kept).rstrip() for row in rows
    )


def _cell(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def action_detail(action: dict[str, Any]) -> str:
    lines = [
        f"action {action['id']}  queue {action['queue']}  run {action['run']}  {action['state']}"
    ]
    if action.get("queue_source"):
        lines.append(f"  queue from: {action['queue_source']}")
    for container in action["containers"]:
        requests = ", ".join(f"{k}={v}" for k, v in container["resources"].items())
        if container.get("gpu") is not None:
            requests += f", gpu={container['gpu']}"
        lines.append(f"  container {container['name']}: {requests or 'no requests'}")
    if action["environment"]:
        lines.append(f"  runs in environment {action['environment']}")
    placement = action.get("placement")
    if placement:
        spots = ", ".join(
            f"{c['name']} -> {c['node_pool']}/{c['node']}" for c in placement["containers"]
        )
        lines.append(f"  placed on cluster {placement['cluster']}: {spots}")
    if action["waiting_reason"]:
        lines.append(f"  waiting: {action['waiting_reason']}: {action['waiting_message']}")
    if action.get("queue_position") is not None:
        ahead = action["ahead_competing"]
        lines.append(
            f"  in line: {action['queue_position']} in queue {action['queue']},"
            f" {action['global_position']} in the global order;"
            f" {ahead} ahead could take the capacity it needs"
        )
    if action.get("expected_duration"):
        lines.append(f"  expected duration: {action['expected_duration']}")
    estimate = forecast_line(action)
    if estimate:
        lines.append(f"  {estimate}")
    if action["code"] or action["message"]:
        lines.append(f"  {action['code'] or 'FAILED'}: {action['message']}")
    return "\n".join(lines)


def forecast_line(data: dict[str, Any]) -> str | None:
    """A waiting action's estimated start and its assumption, from an action or an
    explanation (older services send neither)."""
    assumption = data.get("estimate_assumption")
    if not assumption:
        return None
    start = data.get("estimated_start")
    return f"estimated start: {start} ({assumption})" if start else f"estimated start: {assumption}"


def tick_json(result: TickResult) -> str:
    """The TickResult as JSON (`sluice solve --json`), quantities spelled as people write them."""
    data = result.model_dump(mode="json")
    data["queues"] = {name: _spelled(metrics) for name, metrics in result.queues.items()}
    return to_json(data, indent=2).decode()


def _spelled(metrics: QueueMetrics) -> dict[str, Any]:
    """The metrics as JSON with their quantities spelled (`4Ti`, `500m`), as the API shows them."""
    view = metrics.model_dump(mode="json")
    for field in ("in_flight_resources", "max_resources"):
        view[field] = {r: format_quantity(r, amount) for r, amount in view[field].items()}
    return view


def tick_summary(result: TickResult) -> str:
    """A readable account of one tick, for `sluice solve` without --json."""
    solver = result.solver
    lines = [
        f"tick at {result.now.isoformat()}: {len(result.scheduled)} scheduled,"
        f" {len(result.failed)} failed, {len(result.waiting)} waiting"
        f" ({solver.status.value}, {solver.wall_time_s * 1000:.1f} ms"
        f"{', time limit hit' if solver.limit_hit else ''})"
    ]
    if result.environments_started:
        lines.append("reusable pools started")
        for start in result.environments_started:
            lines.append(f"  {start.environment:<20} {start.queue:<16} {start.cluster}")
    if result.scheduled:
        lines.append("scheduled")
        for decision in result.scheduled:
            where = (
                f"{decision.cluster}: "
                + ", ".join(
                    f"{c.name} -> {c.node_pool}/{c.node}{' (new node)' if c.new_node else ''}"
                    for c in decision.containers
                )
                if decision.cluster
                else f"joins pool {decision.environment}"
            )
            lines.append(f"  {decision.action:<20} {decision.queue:<16} {where}")
    if result.failed:
        lines.append("failed")
        for failure in result.failed:
            lines.append(
                f"  {failure.action:<20} {failure.queue:<16}"
                f" {failure.code.value}: {failure.message}"
            )
    if result.waiting:
        lines.append("waiting")
        for waiting in result.waiting:
            lines.append(
                f"  {waiting.action:<20} {waiting.queue:<16}"
                f" {waiting.reason.value}: {waiting.message}"
            )
    lines.append("queues")
    for metrics in result.queues.values():
        view = _spelled(metrics) | {
            "draining": False,
            "clusters": None,
            "as_of": None,
        }
        caps = "; ".join(
            f"{label} {used_text}/{cap_text}"
            for label, _, _, used_text, cap_text in _cap_rows(view)
        )
        blocked = f"  BLOCKED behind {metrics.head_action}" if metrics.head_blocked else ""
        lines.append(
            f"  {metrics.name:<20} {metrics.scheduling.value:<16}"
            f" running {metrics.running_actions}, waiting {metrics.waiting}"
            f"{'; ' + caps if caps else ''}{blocked}"
        )
    return "\n".join(lines)
