"""Read models shared by the routers, the watch streams and /metrics."""

from __future__ import annotations

from api.schemas.actions import ActionPublic
from api.schemas.job_queues import JobQueuePublic
from api.schemas.queues import QueuePublic
from api.store.records import ActionRecord, QueueCounts, QueueRecord, Store
from api.ticker import TickLoop


def queue_views(
    store: Store, ticker: TickLoop, pools: list[str] | None = None
) -> list[QueuePublic]:
    """Every queue (in the given pools), with usage from the last tick."""
    counts = store.queue_counts()
    return [
        _view(record, counts, ticker)
        for record in store.list_queues()
        if not pools or record.queue.pool in pools
    ]


def queue_view(store: Store, ticker: TickLoop, name: str) -> QueuePublic:
    """One queue; a blocked strict_fifo head comes with the explanation its tick computed,
    if the head is still the one it explained."""
    record = store.get_queue(name)
    view = _view(record, store.queue_counts(name), ticker)
    explanation = ticker.head_explanations.get(name)
    if view.head_blocked and explanation and explanation.action == view.head_action:
        return view.model_copy(update={"head_explanation": explanation})
    return view


def _view(record: QueueRecord, counts: dict[str, QueueCounts], ticker: TickLoop) -> QueuePublic:
    result = ticker.last_summary
    name = record.queue.name
    metrics = result.queues.get(name) if result else None
    return QueuePublic.of(
        record,
        counts.get(name, QueueCounts()),
        metrics,
        result.now if result else None,
        ticker.deadline_exceeded.get(name, []),
    )


def action_view(record: ActionRecord, ticker: TickLoop) -> ActionPublic:
    action_id = record.action.id
    return ActionPublic.of(record, ticker.waiting.get(action_id), ticker.forecast(action_id))


def job_queue_view(store: Store, ticker: TickLoop, name: str) -> JobQueuePublic:
    """One quota-managed job queue: status and job counts now, usage as of the last tick."""
    result = ticker.last_summary
    return JobQueuePublic.of(
        store.get_job_queue(name), store.share_counts(name), result.quota if result else None
    )


def job_queue_views(store: Store, ticker: TickLoop) -> list[JobQueuePublic]:
    result = ticker.last_summary
    counts = store.share_counts()
    quota = result.quota if result else None
    return [JobQueuePublic.of(record, counts, quota) for record in store.list_job_queues()]
