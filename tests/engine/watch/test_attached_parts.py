"""``stepview --attach`` reading a full record sent in parts (no vLLM: hand-written records on a
real zmq socket): the watch says it is receiving the picture and shows nothing of it until the
last part is in, then every request at once, as from a whole full record; a request the parts
had named that left meanwhile has left.
"""

from __future__ import annotations

from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch.link.attached import AttachedEngine
from stepview.model.snapshot import EngineState
from tests.engine.watch.attach_helpers import Server, Watcher, part, wait_until


def test_the_parts_of_a_full_record_show_as_one_picture(
    server: Server, engine: AttachedEngine
) -> None:
    watcher = Watcher(engine)
    server.send(part(1, 5, "a-0123abcd", "b-0123abcd", full=True))
    server.send(part(2, 3, "c-0123abcd"))

    def receiving() -> bool:
        engine.has_unfinished()
        return "3 requests to come" in engine.link().message

    wait_until(receiving)
    assert not engine.has_unfinished()  # nothing to show until the picture is whole
    assert engine.link().message == "receiving the server's full picture: 3 requests to come"
    end = EndedFacts("b-0123abcd", 1, [5], "length")
    server.send(part(3, 0, "d-0123abcd", "e-0123abcd", finished=["b-0123abcd"], ended=[end]))
    result = watcher.step()
    assert sorted(a.request_id for a in result.arrived) == ["a", "b", "c", "d", "e"]
    assert [e.request_id for e in result.ended] == []  # b ended as its record said:
    (sample,) = watcher.finished()["b"].completions
    assert (list(sample.token_ids), sample.finish_reason) == ([5], "length")
    assert set(watcher.active()) == {"a", "c", "d", "e"}
    assert engine.link() == (EngineState.RUNNING, "", (), 0.0, 0)  # the picture is in
