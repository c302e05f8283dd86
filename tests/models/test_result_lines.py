"""A tick's result and its forecasts as JSON lines: what the worker hands the server and what
the leader stores for the followers, decoded a line at a time."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.encoded import EncodedModels
from models.forecast import StartForecast, forecast_lines, read_forecast_lines
from models.result import (
    LINE_ENTRIES,
    ResultPart,
    ScheduledAction,
    TickResult,
    WaitingAction,
    WaitReason,
    encoded_waiting,
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


@given(st.integers(0, 3 * LINE_ENTRIES))
def test_waiting_actions_encoded_one_by_one_make_the_same_lines(waiting: int) -> None:
    """The worker encodes each waiting action once (the server keeps them so, D311); the
    result's text joins those, byte for byte what dumping the lines makes."""
    result = _result(2, waiting)
    encoded = encoded_waiting(result)
    assert dict(encoded) == {entry.action: entry for entry in result.waiting}
    assert split_result(result, encoded) == split_result(result)
    lines = [
        ResultPart(waiting=result.waiting[i : i + LINE_ENTRIES]).model_dump_json(
            exclude={"scheduled"}
        )
        for i in range(0, waiting, LINE_ENTRIES)
    ]
    assert [line.decode() for line in split_result(result)[1][1:]] == lines
    assert read_result_text(result_text(result, encoded)) == result


def test_a_repeated_waiting_id_keeps_every_entry_in_the_text() -> None:
    result = _result(0, 3)
    twice = result.model_copy(update={"waiting": [*result.waiting, result.waiting[0]]})
    assert read_result_text(result_text(twice, encoded_waiting(twice))) == twice


def test_forecasts_kept_encoded_make_the_same_lines() -> None:
    forecasts = {
        f'w"é{i}': StartForecast(action=f"w{i}", estimated_start=None, assumption="unknown")
        for i in range(2 * LINE_ENTRIES + 1)
    }
    encoded = EncodedModels.of(StartForecast, forecasts.items())
    assert forecast_lines(encoded) == forecast_lines(forecasts)
    assert dict(encoded) == forecasts and 'w"é0' in encoded and "w0" not in encoded


@given(st.dictionaries(st.text(), st.integers(0, 10), max_size=40))
def test_encoded_models_cross_processes_as_one_block_and_read_the_same(
    hours: dict[str, int],
) -> None:
    """Issue 12: "The service solves in a separate worker process ..., so the API's event
    loop and threads never wait on the solver or the GIL." The worker's waiting actions and
    forecasts reach the server pickled as one block of bytes (D449), which the server reads
    entry by entry as it read the mapping, whatever the keys (new lines, quotes, any
    character)."""
    forecasts = {
        key: StartForecast(action=key, estimated_start=None, assumption=f"{h} h")
        for key, h in hours.items()
    }
    encoded = EncodedModels.of(StartForecast, forecasts.items())
    crossed = pickle.loads(pickle.dumps(encoded))
    assert list(crossed) == list(forecasts) and len(crossed) == len(forecasts)
    assert all(key in crossed for key in forecasts) and "\x00absent" not in crossed
    assert dict(crossed) == forecasts
    assert forecast_lines(pickle.loads(pickle.dumps(encoded))) == forecast_lines(forecasts)
    again = pickle.loads(pickle.dumps(crossed))
    assert again.encoded == encoded.encoded
    with pytest.raises(KeyError):
        crossed["\x00absent"]
