"""The background cleanup: finished actions and jobs past the service's retention are pruned.

It runs beside the tick loop, a batch (api.store.retention.PRUNE_BATCH) per write
transaction, so a first cleanup of a large file never holds the writer for long; a full
batch is followed at once by the next, otherwise it waits `every_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

from api.metrics import QUEUE_WAIT_BOUNDS_S
from api.store.records import Retention, Store
from api.store.retention import PRUNE_BATCH

log = logging.getLogger("sluice.cleanup")


class Cleanup:
    def __init__(self, store: Store, retention: Retention, every_s: float) -> None:
        self.store = store
        self.retention = retention
        self.every_s = every_s
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """End `run_forever` after the batch in progress (if any) is committed."""
        self._stopping.set()

    def prune_once(self) -> int:
        """One batch of actions and one of jobs; the larger of the two counts. What /metrics
        counts stays counted (api.store.retention)."""
        now = datetime.now(UTC)
        actions = self.store.prune_finished(now, self.retention, QUEUE_WAIT_BOUNDS_S)
        jobs = self.store.prune_finished_jobs(now, self.retention)
        if actions or jobs:
            log.info("pruned %d finished actions and %d finished jobs past the retention",
                     actions, jobs)  # fmt: skip
        return max(actions, jobs)

    async def run_forever(self) -> None:
        while not self._stopping.is_set():
            try:
                pruned = await asyncio.to_thread(self.prune_once)
            except Exception:  # a failed cleanup must not stop the service; try again later
                log.exception("cleanup of finished work failed; next try in %.0f s", self.every_s)
                pruned = 0
            if pruned < PRUNE_BATCH:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), timeout=self.every_s)
