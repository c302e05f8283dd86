"""A tick's result and its forecasts as JSON lines: what the worker hands the server and what
the leader stores for the followers, decoded a line at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from models.forecast import StartForecast, forecast_lines, read_forecast_lines
from models.result import (
    LINE_ENTRIES,
    ResultPart,
    ScheduledAction,
    TickResult,
    WaitingAction,
    WaitReason,
    read_result_text,
    result_text,
    split_result,
)
from models.solver_info import SolverInfo, SolverStatus

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def _result(scheduled: int, waiting: int) -> TickResult:
    return TickResult(
        now=NOW,
        scheduled=[
            ScheduledAction(action=f"s{i}", queue="q", run=f"r{i}", cluster="east", waiting=i)
            for i in range(scheduled)
        ],
        waiting=[
            WaitingAction(
                action=f"w{i}",
                queue="q",
                reason=WaitReason.QUEUE_CAP,
                resource="cpu",
                message="waits\nfor room",  # a newline inside a value stays escaped
                queue_position=i + 1,
            )
            for i in range(waiting)
        ],
        solver=SolverInfo(status=SolverStatus.OPTIMAL, wall_time_s=0.1, limit_hit=False),
    )


@given(st.integers(0, 3 * LINE_ENTRIES), st.integers(0, 3 * LINE_ENTRIES))
def test_a_split_result_reads_back_whole_a_bounded_line_at_a_time(
    scheduled: int, waiting: int
) -> None:
    result = _result(scheduled, waiting)
    rest, parts = split_result(result)
    assert rest.scheduled == [] and rest.waiting == []
    for line in parts:
        assert b"\n" not in line
        part = ResultPart.model_validate_json(line)
        assert 0 < len(part.scheduled) + len(part.waiting) <= LINE_ENTRIES
    assert read_result_text(result_text(result)) == result


def test_a_whole_results_json_reads_as_one_line() -> None:
    """A row written before results were split holds the result's JSON in one piece."""
    result = _result(3, 300)
    assert read_result_text(result.model_dump_json()) == result


@given(st.integers(0, 3 * LINE_ENTRIES))
def test_forecasts_read_back_whole_from_their_lines(count: int) -> None:
    forecasts = {
        f"w{i}": StartForecast(
            action=f"w{i}",
            estimated_start=NOW + timedelta(minutes=i) if i % 3 else None,
            assumption="its expected_duration",
        )
        for i in range(count)
    }
    lines = forecast_lines(forecasts)
    assert len(lines) == -(-count // LINE_ENTRIES)
    assert read_forecast_lines(lines) == forecasts
