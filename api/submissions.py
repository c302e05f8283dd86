"""Submissions from the event loop, routed and committed off it, many to one thread call.

A route declared `def` costs FastAPI a worker-thread hop per request (anyio's limiter, cancel
scopes and thread hand-over), which under the bench's load was more of a submission's server
CPU than Sluice's own work for it (docs/benchmarks.md, the request path's submissions). The
submission routes are `async def` instead, and hand their work here: what arrives while a
commit is in progress waits for the next one, and each commit is one thread call that routes
every waiting submission (routing reads the store: tasks, environments, runs) and stores them
with one COMMIT (`Store.submit_together`). Each caller is answered only once its own
submission is on disk or refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from api.store.records import Store, Submission

Route = Callable[[], Submission]
"""A submission's routing: its actions on their queues, with rights checked, or a refusal
raised. It runs in the commit's thread."""


@dataclass(frozen=True)
class _Waiting:
    route: Route
    stored: asyncio.Future[Submission]


class GroupCommit:
    """One store's submissions, committed together as they arrive."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._waiting: list[_Waiting] = []
        # The commit in progress, held here: the loop keeps only a weak reference to a task.
        self._committing: asyncio.Task[None] | None = None

    async def submit(self, route: Route) -> Submission:
        """The routed submission once it is stored; its routing's or the store's refusal
        raised otherwise."""
        stored: asyncio.Future[Submission] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(route, stored))
        if self._committing is None:
            self._committing = asyncio.create_task(self._commit_waiting(), name="group-commit")
        return await stored

    async def _commit_waiting(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    outcomes = await asyncio.to_thread(self._store, [w.route for w in batch])
                except BaseException:  # cancelled (the server stops): no caller may wait on
                    for waiting in [*batch, *self._waiting]:
                        waiting.stored.cancel()
                    self._waiting = []
                    raise
                for waiting, outcome in zip(batch, outcomes, strict=True):
                    if waiting.stored.done():  # its caller went away; the submission stands
                        continue
                    if isinstance(outcome, Exception):
                        waiting.stored.set_exception(outcome)
                    else:
                        waiting.stored.set_result(outcome)
        finally:
            self._committing = None

    def _store(self, routes: list[Route]) -> list[Submission | Exception]:
        """In the commit's thread: route each submission, then store the routed ones."""
        outcomes: list[Submission | Exception] = []
        for route in routes:
            try:
                outcomes.append(route())
            except Exception as error:  # that caller's answer (a refusal, or a 500)
                outcomes.append(error)
        routed = [outcome for outcome in outcomes if isinstance(outcome, Submission)]
        refusals = iter(self.store.submit_together(routed))
        for index, outcome in enumerate(outcomes):
            if isinstance(outcome, Submission):
                refusal = next(refusals)
                if refusal is not None:
                    outcomes[index] = refusal
        return outcomes
