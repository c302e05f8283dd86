"""Task templates and the queues runs were created with, and where each action's queue came
from (models.tasks resolves it; api.routes.actions asks this part for the levels).

A run's queue is kept in its own table the first time a submission of the run carries one
(`run_queue`): later submissions into the run that name no queue inherit it, and a
submission that gives the run another queue is refused, so a run has one queue for life.
"""

from __future__ import annotations

from collections.abc import Mapping

from api.store.actions import SqlActions
from api.store.backends import Conn, DuplicateKey
from api.store.connection import SqlDatabase
from models.errors import AlreadyExists, FailedPrecondition, NotFound
from models.tasks import QueueSource, TaskTemplate


class SqlTasks(SqlDatabase):
    """Task templates and run queues over the actions' file."""

    def create_task(self, task: TaskTemplate) -> TaskTemplate:
        with self._write() as conn:
            for queue in task.queues:
                SqlActions._fetch_queue(conn, queue)
            try:
                conn.execute(
                    "INSERT INTO tasks (name, body) VALUES (?, ?)",
                    (task.name, task.model_dump_json()),
                )
            except DuplicateKey:
                raise AlreadyExists(f"task {task.name!r} already exists", field="name") from None
        return task

    @staticmethod
    def _fetch_task(conn: Conn, name: str) -> TaskTemplate:
        row = conn.execute("SELECT body FROM tasks WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFound(f"task {name!r} does not exist", field="task")
        return TaskTemplate.model_validate_json(row[0])

    def get_task(self, name: str) -> TaskTemplate:
        with self._read() as conn:
            return self._fetch_task(conn, name)

    def list_tasks(self) -> list[TaskTemplate]:
        with self._read() as conn:
            rows = conn.execute("SELECT body FROM tasks ORDER BY name").fetchall()
        return [TaskTemplate.model_validate_json(body) for (body,) in rows]

    def delete_task(self, name: str) -> None:
        """The template goes; actions submitted from it keep what they were given."""
        with self._write() as conn:
            self._fetch_task(conn, name)
            conn.execute("DELETE FROM tasks WHERE name = ?", (name,))

    def run_queue(self, run: str) -> str | None:
        """The queue run `run` was created with, if any."""
        with self._read() as conn:
            row = conn.execute("SELECT queue FROM run_queues WHERE run = ?", (run,)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _record_routing(
        conn: Conn,
        sources: Mapping[str, QueueSource],
        run_queues: Mapping[str, str],
    ) -> None:
        """Inside a submission's transaction: each action's queue source, and each run's
        queue the first time one is given (a different one later is refused)."""
        for run, queue in run_queues.items():
            conn.execute(
                "INSERT INTO run_queues (run, queue) VALUES (?, ?) ON CONFLICT (run) DO NOTHING",
                (run, queue),
            )
            (kept,) = conn.execute("SELECT queue FROM run_queues WHERE run = ?", (run,)).fetchone()
            if kept != queue:
                raise FailedPrecondition(
                    f"run {run} was created on queue {kept}; it cannot move to queue {queue}",
                    field="run_queue",
                )
        conn.executemany(
            "UPDATE actions SET queue_source = ? WHERE id = ?",
            [(source.value, action_id) for action_id, source in sources.items()],
        )
