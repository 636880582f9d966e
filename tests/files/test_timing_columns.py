"""The latency figures of the results records and the CSV export, pinned to their values.

Both formats are read by people's own tools, so a refactor of where the figures come from
must leave every name, value and rounding as it was: JSON rounds to 6 decimals, CSV prints
6 decimals, and a figure the request never reached is ``None`` / an empty cell.
"""

from __future__ import annotations

from stepview.files.csv_export import COLUMNS, csv_row
from stepview.files.records import request_record
from stepview.model.snapshot import RequestState, RequestView
from stepview.testing.snapshots import request

FINISHED = request(
    "done",
    "p",
    RequestState.FINISHED,
    arrival=7.0,
    scheduled=7.05,
    first_token=7.1,
    finished=7.9,
    tokens=16,
    reason="length",
)
WAITING = request("queued", "p", RequestState.WAITING, arrival=10.0)
ABORTED = request("gone", "p", RequestState.ABORTED, arrival=9.0, scheduled=9.1, finished=9.6)


def _csv(view: RequestView) -> dict[str, str]:
    return dict(zip(COLUMNS, csv_row(request_record(view)), strict=True))


def test_record_timings_of_a_finished_request() -> None:
    timings = request_record(FINISHED)["timings"]
    assert timings == {
        "arrival": 7.0,
        "scheduled": 7.05,
        "first_token": 7.1,
        "finished": 7.9,
        "queue_time": 0.05,
        "ttft": 0.1,
        "e2e": 0.9,
    }


def test_record_timings_of_requests_that_never_got_there() -> None:
    waiting = request_record(WAITING)["timings"]
    assert (waiting["queue_time"], waiting["ttft"], waiting["e2e"]) == (None, None, None)
    aborted = request_record(ABORTED)["timings"]
    assert (aborted["queue_time"], aborted["ttft"], aborted["e2e"]) == (0.1, None, 0.6)


def test_csv_latency_columns() -> None:
    row = _csv(FINISHED)
    assert (row["queue_time"], row["ttft"], row["e2e"]) == ("0.050000", "0.100000", "0.900000")
    waiting = _csv(WAITING)
    assert (waiting["queue_time"], waiting["ttft"], waiting["e2e"]) == ("", "", "")
    aborted = _csv(ABORTED)
    assert (aborted["queue_time"], aborted["ttft"], aborted["e2e"]) == ("0.100000", "", "0.600000")
