"""A clone or fork keeps its parent from the ``AddRequest`` to its last view and its record.

The ledger is driven by hand over the fake engine (as in ``test_ledger.py``); the record is
the one ``--headless --json`` prints and the results file keeps.
"""

from __future__ import annotations

import json

from stepview.engine.driver.ledger import RequestLedger
from stepview.files.records import request_record
from stepview.model.commands import AddRequest
from stepview.model.lineage import Lineage, LineageKind
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState
from stepview.testing.fake_engine import FakeEngine


def test_lineage_rides_through_every_step_into_the_record() -> None:
    now = [0.0]
    engine = FakeEngine()
    ledger = RequestLedger(lambda: now[0])
    fork = Lineage("r3", LineageKind.FORK, completion=0, token=17)
    ledger.accept(AddRequest("r4", "hello there", SamplingSpec(max_tokens=3), lineage=fork))
    ledger.accept(AddRequest("r5", "hello", SamplingSpec(max_tokens=2)))
    ledger.admit(engine)
    while engine.has_unfinished():
        now[0] += 0.01
        ledger.apply(engine.step(), now[0])
        assert all(v.lineage == (fork if v.request_id == "r4" else None) for v in ledger.active())
    done = {v.request_id: v for v in ledger.finished()}
    assert done["r4"].state is RequestState.FINISHED and done["r4"].lineage == fork
    record = json.loads(json.dumps(request_record(done["r4"])))
    assert record["parent"] == "r3"
    assert record["lineage"] == {"kind": "fork", "completion": 0, "token": 17}
    plain = request_record(done["r5"])
    assert plain["parent"] is None and plain["lineage"] is None


def test_labels_say_what_the_panes_and_detail_show() -> None:
    assert Lineage("r3", LineageKind.CLONE).label() == "clone of r3"
    assert Lineage("r3", LineageKind.FORK, 0, 17).label() == "fork of r3 @ token 17"
    assert Lineage("r3", LineageKind.FORK, 1, 2).label() == "fork of r3 @ token 2 of sample 1"
