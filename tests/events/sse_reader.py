"""A reader of the ``--events`` HTTP stream for tests: httpx, on a thread, every event kept."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx


class StreamReader:
    """Follows ``url`` on a thread of its own, keeping each event's ``id`` and data, until
    the server closes the stream or :meth:`stop`."""

    def __init__(self, url: str, *, last_id: int | None = None, token: str | None = None) -> None:
        self.url = url
        self.headers: dict[str, str] = {}
        if last_id is not None:
            self.headers["Last-Event-ID"] = str(last_id)
        if token is not None:
            self.headers["Authorization"] = f"Bearer {token}"
        self.events: list[tuple[int | None, dict[str, Any]]] = []
        self.status: int | None = None
        self.connected = threading.Event()
        self.ended = threading.Event()
        self.changed = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with httpx.stream("GET", self.url, headers=self.headers, timeout=None) as response:
                self.status = response.status_code
                self.connected.set()
                number: int | None = None
                for line in response.iter_lines():
                    if self._stopping.is_set():
                        return
                    if line.startswith("id: "):
                        number = int(line[4:])
                    elif line.startswith("data: "):
                        with self.changed:
                            self.events.append((number, json.loads(line[6:])))
                            self.changed.notify_all()
                        number = None
        except httpx.HTTPError:
            pass
        finally:
            self.connected.set()
            self.ended.set()
            with self.changed:
                self.changed.notify_all()

    def wait_until(self, test: Any, timeout: float = 30.0) -> None:
        """Until ``test(events)`` holds (or the stream ended): on each event, not a sleep."""
        with self.changed:
            ok = self.changed.wait_for(
                lambda: test(self.events) or self.ended.is_set(), timeout=timeout
            )
        assert ok and test(self.events), f"not reached; {len(self.events)} events read"

    def stop(self) -> None:
        self._stopping.set()

    @property
    def ids(self) -> list[int]:
        return [n for n, _ in self.events if n is not None]
