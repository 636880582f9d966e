"""Aborting a request: exactly the one the user chose, once, and what became of it.

``x`` aborts the request under the cursor when the key is pressed. The engine thread acts on
the abort between two steps, and by then the request may have finished on its own (the abort
raced its finish): only a later snapshot can tell. So the :class:`AbortTracker` remembers the
aborts it let through, refuses to send one twice (a second ``x`` on the same row before it
left), and reports each one's outcome once the request shows up finished. Plain logic over
snapshots, tested without an app.
"""

from __future__ import annotations

from typing import NamedTuple

from textual.notifications import SeverityLevel

from stepview.model.snapshot import RequestState, RequestView, StepSnapshot


class Notice(NamedTuple):
    """A line to tell the user; ``warning`` when nothing happened that they asked for."""

    text: str
    warning: bool = False

    @property
    def severity(self) -> SeverityLevel:
        return "warning" if self.warning else "information"

    @property
    def timeout(self) -> float:
        """Seconds on screen: a warning stays longer than a plain acknowledgement."""
        return 5.0 if self.warning else 2.0


class AbortTracker:
    """Which aborts were sent and are not settled yet; see the module docstring."""

    def __init__(self) -> None:
        self._sent: dict[str, None] = {}  # request ids, in the order they were sent

    @property
    def pending(self) -> tuple[str, ...]:
        """Aborts sent whose outcome is not known yet."""
        return tuple(self._sent)

    def ask(self, view: RequestView | None) -> tuple[str | None, Notice]:
        """The user pressed ``x`` over ``view``: the id to abort (None: send nothing), and
        what to tell them."""
        if view is None:
            return None, Notice("No request selected.", warning=True)
        request_id = view.request_id
        if view.state.done:
            return None, Notice(f"{request_id} is already {view.state.value}.", warning=True)
        if request_id in self._sent:
            return None, Notice(f"abort already sent for {request_id}", warning=True)
        self._sent[request_id] = None
        return request_id, Notice(f"abort sent for {request_id}")

    def settle(self, snapshot: StepSnapshot) -> list[Notice]:
        """The outcome of every abort sent whose request ``snapshot`` shows in a final state."""
        if not self._sent:
            return []
        notices = []
        for request_id in list(self._sent):
            view = snapshot.find(request_id)
            if view is None or not view.state.done:
                continue
            del self._sent[request_id]
            if view.state is RequestState.ABORTED:
                notices.append(Notice(f"{request_id} aborted"))
            elif view.state is RequestState.FINISHED:
                text = f"{request_id} already finished before the abort reached the engine"
                notices.append(Notice(text, warning=True))
            else:
                notices.append(Notice(f"{request_id} is {view.state.value}", warning=True))
        return notices
