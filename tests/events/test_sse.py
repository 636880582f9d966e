"""The Server-Sent Events server on its own: numbering, several readers, Last-Event-ID,
a reader that reads nothing, the bearer token, and the refusals (no engine needed)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from stepview.events.buffer import EventBuffer
from stepview.events.spec import parse_destination, remote_refusal
from stepview.events.sse import EventServer, EventsUnavailable
from tests.events.sse_reader import StreamReader


def _events(first: int, count: int) -> list[dict[str, object]]:
    return [{"v": 1, "event": "step", "n": n} for n in range(first, first + count)]


@pytest.fixture
def served() -> Iterator[EventServer]:
    server = EventServer(EventBuffer(100), "127.0.0.1", 0, queue=1000)
    yield server
    server.stop()


def test_readers_get_every_event_numbered_from_one(served: EventServer) -> None:
    served.buffer.extend(_events(0, 3))  # before anyone reads: for Last-Event-ID 0 only
    late = StreamReader(served.url)
    early = StreamReader(served.url, last_id=0)
    for reader in (late, early):
        reader.connected.wait(10)
        assert reader.status == 200
    # Both are followed before more come: a wake-up reaches every reader.
    for start in range(3, 43, 5):
        served.buffer.extend(_events(start, 5))
    early.wait_until(lambda events: len(events) == 43)
    late.wait_until(lambda events: len(events) >= 1 and events[-1][1]["n"] == 42)
    assert early.ids == list(range(1, 44))
    assert [e["n"] for _, e in early.events] == list(range(43))
    # Connected live: it starts at the newest when it connected, then misses nothing.
    assert late.ids == list(range(late.ids[0], 44))
    early.stop()
    late.stop()


def test_a_reader_that_comes_back_gets_what_it_missed(served: EventServer) -> None:
    served.buffer.extend(_events(0, 30))
    back = StreamReader(served.url, last_id=17)
    back.wait_until(lambda events: len(events) == 13)
    assert back.ids == list(range(18, 31))
    back.stop()


def test_a_reader_asking_for_more_than_the_buffer_holds_is_told_how_many() -> None:
    server = EventServer(EventBuffer(10), "127.0.0.1", 0, queue=1000)
    try:
        server.buffer.extend(_events(0, 25))  # 16..25 held
        reader = StreamReader(server.url, last_id=0)
        reader.wait_until(lambda events: len(events) == 11)
        number, told = reader.events[0]
        assert number is None and told["event"] == "dropped"
        assert (told["count"], told["first"], told["last"], told["why"]) == (15, 1, 15, "buffer")
        assert reader.ids == list(range(16, 26))
        reader.stop()
    finally:
        server.stop()


def test_a_reader_that_reads_nothing_is_dropped_and_another_misses_nothing() -> None:
    counted: list[int] = []

    server = EventServer(EventBuffer(100_000), "127.0.0.1", 0, queue=50, on_dropped=counted.append)
    try:
        reader = StreamReader(server.url, last_id=0)
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(("127.0.0.1", server.port))
        stuck.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 0\r\n\r\n")
        padding = "x" * 200
        sent = 0
        # Events in bursts until the stuck reader has lost a queue's worth (its socket is
        # never read), which closes it: counted as it happens, no sleep, no fixed count.
        while sum(counted) < 50:
            batch = [{"v": 1, "event": "step", "n": sent + i, "pad": padding} for i in range(50)]
            server.buffer.extend(batch)
            sent += 50
            reader.wait_until(lambda events, sent=sent: len(events) == sent)
            assert sent < 200_000, "the reader that reads nothing was never dropped"
        # Dropped after losing --events-queue events in all: its connection is closed.
        _read_to_end(stuck)
        assert sum(counted) >= 50 and server.dropped_total == sum(counted)
        server.buffer.extend(_events(sent, 10))
        reader.wait_until(lambda events: len(events) == sent + 10)
        assert reader.ids == list(range(1, sent + 11))  # the other reader: complete
        assert all(e["event"] != "dropped" for _, e in reader.events)
        reader.stop()
    finally:
        server.stop()


def _read_to_end(sock: socket.socket) -> None:
    """Read ``sock`` until the server closed it (reset, or the end of the stream); a
    connection left open would time out here instead."""
    sock.settimeout(10)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    finally:
        sock.close()


def test_the_token_is_asked_for() -> None:
    server = EventServer(EventBuffer(10), "127.0.0.1", 0, queue=5, token="s3cret")
    try:
        with httpx.Client(timeout=10) as client:
            assert client.get(server.url).status_code == 401
            wrong = {"Authorization": "Bearer nope"}
            assert client.get(server.url, headers=wrong).status_code == 401
            assert client.get(server.url.replace("/events", "/x")).status_code == 404
        reader = StreamReader(server.url, token="s3cret", last_id=0)
        server.buffer.extend(_events(0, 2))
        reader.wait_until(lambda events: len(events) == 2)
        assert reader.status == 200
        reader.stop()
    finally:
        server.stop()


def test_a_port_in_use_is_one_line(served: EventServer) -> None:
    with pytest.raises(EventsUnavailable) as caught:
        EventServer(EventBuffer(10), "127.0.0.1", served.port, queue=5)
    assert str(caught.value) == f"cannot serve events on 127.0.0.1:{served.port}: address in use"


@pytest.mark.parametrize("address", ["http://0.0.0.0:8765", "http://192.0.2.7:8765"])
def test_an_address_others_reach_needs_the_opt_in(address: str) -> None:
    destination = parse_destination(address)
    refusal = remote_refusal(destination, remote=False)
    assert refusal is not None and "--events-remote" in refusal
    assert remote_refusal(destination, remote=True) is None
    assert remote_refusal(parse_destination("http://127.0.0.1:8765"), remote=False) is None
    assert remote_refusal(parse_destination("http://localhost:8765"), remote=False) is None
