"""Where a sweep's solves run: local worker processes (the default) or a Ray cluster.

An executor takes the snapshot's path and one change list per task and yields each task's
result as it finishes (its index and the `Solved`, or the exception it raised), so the sweep
(solver.whatif.sweep) counts progress, stops at the first error and builds its table the same
way whichever runs the solves. Closing the iterator early cancels the tasks not yet started.
Ray is imported only by `RayExecutor`, so the core install does without it.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from models.errors import FailedPrecondition, InternalError, Unavailable
from models.snapshot import Snapshot
from solver import TickOptions
from solver.whatif.compare import ScenarioEdit, Solved, apply_changes, load_snapshot

Changes = tuple[ScenarioEdit, ...]
Finished = tuple[int, Solved | BaseException]

RAY_EXTRA = "pip install -e '.[ray]'"
# Ray's start-up notices and its workers' output would tear through the sweep's progress bar.
_QUIET: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}


class SweepExecutor(Protocol):
    def solve_each(
        self, snapshot: Path, tasks: Sequence[Changes], options: TickOptions
    ) -> Generator[Finished, None, None]:
        """Every task's (index, result or error), in the order they finish."""
        ...


# --- local worker processes -----------------------------------------------------------------------

_snapshot: Snapshot | None = None  # each worker's copy, loaded once by _load


def _load(path: str) -> None:
    global _snapshot
    _snapshot = load_snapshot(path)


def _solve_in_worker(changes: Changes, options: TickOptions) -> Solved:
    if _snapshot is None:
        raise InternalError("a sweep worker started without its snapshot")
    return Solved.of(apply_changes(_snapshot, changes), options)


@dataclass(frozen=True)
class LocalExecutor:
    """`workers` processes on this machine, each loading the snapshot once."""

    workers: int

    def solve_each(
        self, snapshot: Path, tasks: Sequence[Changes], options: TickOptions
    ) -> Generator[Finished, None, None]:
        # spawn, not fork: OR-Tools and Arrow keep threads a forked child would inherit half-made.
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(
            max_workers=max(1, min(self.workers, len(tasks))),
            mp_context=context,
            initializer=_load,
            initargs=(str(snapshot),),
        )
        try:
            futures: dict[Future[Solved], int] = {
                pool.submit(_solve_in_worker, changes, options): index
                for index, changes in enumerate(tasks)
            }
            for future in as_completed(futures):
                error = future.exception()
                yield futures[future], future.result() if error is None else error
        finally:
            pool.shutdown(cancel_futures=True)  # the solves under way still finish


# --- Ray ------------------------------------------------------------------------------------------


def _solve_on_ray(snapshot: Snapshot, changes: Changes, options: TickOptions) -> Solved:
    return Solved.of(apply_changes(snapshot, changes), options)


@dataclass(frozen=True)
class RayExecutor:
    """One Ray task per variant; the snapshot goes into Ray's object store once.

    Uses the Ray instance this process is already connected to; else connects to `address`
    (a running cluster), or with no address starts a local instance of `cpus` CPUs on loopback
    only. What it connected or started it shuts down again when the sweep ends.
    """

    address: str | None = None
    cpus: int | None = None

    def solve_each(
        self, snapshot: Path, tasks: Sequence[Changes], options: TickOptions
    ) -> Generator[Finished, None, None]:
        ray = import_ray(loopback=on_loopback(self.address))
        connected_here = not ray.is_initialized()
        if connected_here:
            if self.address is None:
                # "local": a new instance, even where one runs already (`ray start`).
                ray.init("local", num_cpus=self.cpus, include_dashboard=False, **_QUIET)
            else:
                try:
                    ray.init(address=self.address, **_QUIET)
                except ConnectionError as error:
                    raise Unavailable(f"Ray cluster at {self.address}: {error}") from error
        try:
            yield from _ray_tasks(ray, load_snapshot(snapshot), tasks, options)
        finally:
            if connected_here:
                ray.shutdown()


def _ray_tasks(
    ray: Any, snapshot: Snapshot, tasks: Sequence[Changes], options: TickOptions
) -> Generator[Finished, None, None]:
    solve = ray.remote(_solve_on_ray)
    shared = ray.put(snapshot)
    pending = {solve.remote(shared, changes, options): index for index, changes in enumerate(tasks)}
    try:
        while pending:
            # One at a time, in the order they finish: the progress bar moves with each.
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(ready)
            try:
                yield index, ray.get(ready)
            except ray.exceptions.RayTaskError as error:
                yield index, error.cause if error.cause is not None else error
    finally:
        for ref in pending:
            ray.cancel(ref)


def on_loopback(address: str | None) -> bool:
    """Whether the Ray instance is this machine's alone: started here, or given as a loopback
    address (`ray start --head` with the same switch)."""
    if address is None:
        return True
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return host in {"localhost", "::1"} or host.startswith("127.")


def import_ray(loopback: bool) -> Any:
    """The `ray` module, or FAILED_PRECONDITION naming the extra that installs it.

    `loopback`: a Ray instance this process starts listens on 127.0.0.1 only, and a loopback
    address is dialled as given. Ray reads the switch once, at its import, and then gives every
    node the loopback address instead of the machine's (else it would turn 127.0.0.1 into the
    machine's address); a driver of a remote cluster must not set it, or the cluster could not
    reach it.
    """
    if loopback:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError as error:
        raise FailedPrecondition(
            f"--executor ray needs Ray, which is not installed: {RAY_EXTRA}"
        ) from error
    return ray
