"""What every test of the event stream holds a run's events to, whatever carried them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jsonschema

from stepview.events.schema import schema_path
from stepview.model.targets import Member

Event = Mapping[str, Any]

_VALIDATOR: jsonschema.Draft202012Validator | None = None


def validate_all(events: Iterable[Event]) -> int:
    """Hold every event to the shipped JSON Schema; how many there were."""
    global _VALIDATOR
    if _VALIDATOR is None:
        schema = json.loads(schema_path().read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATOR = jsonschema.Draft202012Validator(schema)
    count = 0
    for event in events:
        _VALIDATOR.validate(event)
        count += 1
    return count


def lives(events: Sequence[Event]) -> dict[str, list[str]]:
    """Each request's events, by kind, in order."""
    out: dict[str, list[str]] = {}
    for event in events:
        if "id" in event and event["event"] != "dropped":
            out.setdefault(str(event["id"]), []).append(str(event["event"]))
    return out


def check_lives(events: Sequence[Event], expected: Iterable[str] | None = None) -> None:
    """Every request arrived first and ended exactly once, last (and ``expected`` are all
    there)."""
    by_request = lives(events)
    if expected is not None:
        missing = set(expected) - set(by_request)
        assert not missing, f"no events for {sorted(missing)[:5]}"
    for request_id, kinds in by_request.items():
        assert kinds[0] == "arrived", (request_id, kinds)
        assert kinds.count("arrived") == 1, (request_id, kinds)
        ends = [k for k in kinds if k in ("finished", "aborted")]
        assert len(ends) == 1, (request_id, kinds)
        assert kinds[-1] in ("finished", "aborted"), (request_id, kinds)


def _collapse(codes: Iterable[str | None]) -> list[str]:
    out: list[str] = []
    for code in codes:
        if code is not None and (not out or out[-1] != code):
            out.append(code)
    return out


def reasons_by_request(events: Sequence[Event]) -> dict[str, list[str]]:
    """Each request's wait reasons as the events said them, repeats in a row collapsed."""
    codes: dict[str, list[str | None]] = {}
    for event in events:
        if event["event"] == "waiting":
            codes.setdefault(str(event["id"]), []).append(str(event["code"]))
    return {rid: _collapse(c) for rid, c in codes.items()}


def reasons_of_result(record: Mapping[str, Any]) -> list[str]:
    """A results-file record's wait reasons (its timeline's waiting and preempted segments),
    repeats in a row collapsed."""
    return _collapse(
        segment.get("reason")
        for segment in record["timeline"]
        if segment["state"] in ("waiting", "preempted")
    )


class FixedRoster:
    """A fleet's roster that does not change (the fleet's own follows listings)."""

    def __init__(self, members: list[Member]) -> None:
        self.list = members

    def members(self) -> tuple[Member, ...]:
        return tuple(self.list)

    def problems(self) -> tuple[str, ...]:
        return ()

    def notices(self) -> list[str]:
        return []
