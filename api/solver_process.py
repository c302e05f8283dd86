"""Where the service's solves run: a long-lived worker process, or a thread of the API process.

A solve is CPU-bound Python: in a thread it holds the GIL that the request handlers need, so
every request waits on it while a tick runs (measured in docs/benchmarks.md#service). In a
worker process it holds only that process's GIL. The worker is spawned, not forked: a fork
would copy the server's threads' locks and its open SQLite connections, and the store stays
the single writer in the API process anyway; the worker gets its input as arguments and hands
its answer back.

pebble runs the worker: it starts a new one when the worker dies (kill -9, out of memory)
and stops and replaces a worker whose call overruns its timeout. Either way the call raises
`WorkerLost`, which the caller counts as a failure; the next call runs in the new worker.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol, TypeVar

from pebble import ProcessExpired, ProcessPool

from api.config import TickWorker
from models.errors import Unavailable

T = TypeVar("T")


class WorkerLost(Unavailable):
    """A solve that did not come back: its worker died or overran, and was replaced."""


class Solves(Protocol):
    """Runs one blocking call away from the event loop and awaits its answer."""

    replaced: int  # workers replaced after a crash or a timeout (0 for threads)
    copies: bool  # whether arguments and answers are copied into another process

    @property
    def ready(self) -> bool:
        """Whether a worker has answered a call (and so has imported the solver)."""

    async def run(self, fn: Callable[..., T], *args: object) -> T: ...

    def warm(self, fn: Callable[[], object]) -> None:
        """Start the worker now with a call whose answer nobody waits for."""

    def close(self) -> None: ...


class ThreadSolves:
    """In a thread of this process: no pickling, no timeout (a thread cannot be stopped)."""

    replaced = 0
    copies = False
    ready = True  # this process imported the solver already

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.to_thread(fn, *args)

    def warm(self, fn: Callable[[], object]) -> None:
        pass

    def close(self) -> None:
        pass


class ProcessSolves:
    """In one long-lived spawned worker; a call past `timeout_s` stops and replaces it."""

    copies = True

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self.replaced = 0
        self._answered = False
        self._pool = ProcessPool(max_workers=1, context=multiprocessing.get_context("spawn"))

    @property
    def ready(self) -> bool:
        return self._answered

    def _answer(self, future: Future[Any]) -> None:
        if not future.cancelled() and future.exception() is None:
            self._answered = True

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        future = self._pool.schedule(fn, args=args, timeout=self.timeout_s)
        future.add_done_callback(self._answer)
        try:
            return await asyncio.wrap_future(future)
        except ProcessExpired as error:
            self.replaced += 1
            raise WorkerLost(
                f"the {self.name} worker process died (exit code {error.exitcode}) during the"
                " call; a new worker takes the next one"
            ) from None
        except FutureTimeout:
            self.replaced += 1
            raise WorkerLost(
                f"the {self.name} worker overran its {self.timeout_s:g} s bound; it was stopped"
                " and a new worker takes the next call"
            ) from None

    def warm(self, fn: Callable[[], object]) -> None:
        self._pool.schedule(fn, timeout=self.timeout_s).add_done_callback(self._answer)

    def close(self) -> None:
        self._pool.stop()
        self._pool.join(timeout=10)


def start_solves(kind: TickWorker, name: str, timeout_s: float) -> Solves:
    if kind is TickWorker.PROCESS:
        return ProcessSolves(name, timeout_s)
    return ThreadSolves()
