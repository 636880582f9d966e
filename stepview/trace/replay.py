"""A recorded trace played back as a :class:`~stepview.model.source.SnapshotSource`.

The app shows a replay with the same panes as a live engine: it pulls ``latest()`` on its
timer and never learns the difference, except that ``accepts_requests`` is False. Playback
follows the recorded driver clock: at speed 1 a snapshot appears as long after the previous
one as it did in the run (scaled by the speed), so a trace recorded on a GPU box replays at
that box's pace on a laptop.

This module imports neither vLLM nor torch, not even indirectly (a test checks it in a fresh
interpreter): replaying a trace must work where vLLM is not installed.

A large trace is read on the replay thread a chunk at a time between playback ticks, so the
first snapshot shows at once and ``history()`` grows while the rest loads. The timing logic is
:class:`Playback`, a pure state machine that takes the current time as an argument, so tests
drive it without sleeping.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from stepview.model.commands import Command, Pause, Resume, Shutdown, SingleStep
from stepview.model.errors import describe
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.trace.playback import (
    PlaybackCommand,
    PlaybackStatus,
    Seek,
    SeekEnd,
    SeekStart,
    SetSpeed,
    StepBack,
    StepForward,
    check_speed,
)
from stepview.trace.reader import TraceReader
from stepview.trace.step_fields import start_snapshot
from stepview.trace.store import Trace, TraceSnapshots

log = logging.getLogger(__name__)

# Lines decoded between two playback ticks while a trace loads (a few ms of work).
LOAD_CHUNK = 500
# Longest wait for a command when nothing is due (keeps the thread responsive to a stop).
IDLE_WAIT_S = 0.25


class Playback:
    """Which snapshot of a trace to show at a given time; no threads, no clock of its own.

    While playing, the shown snapshot is the last one whose recorded clock is at or before
    ``anchor_clock + (now - anchor_wall) * speed``; every seek, resume or speed change moves
    the anchor to the current snapshot and ``now``, so playback continues from there.
    """

    def __init__(self, *, speed: float = 1.0, playing: bool = True) -> None:
        self.position = 0
        self.playing = playing
        self.speed = check_speed(speed)
        self._anchor_wall = 0.0
        self._anchor_clock = 0.0
        self._anchored = False

    def _anchor(self, snapshots: TraceSnapshots, now: float) -> None:
        self._anchor_wall = now
        self._anchor_clock = snapshots.play_clock_at(self.position) if snapshots else 0.0
        self._anchored = bool(snapshots)

    def _move(self, snapshots: TraceSnapshots, index: int, now: float) -> None:
        self.position = max(0, min(index, len(snapshots) - 1))
        self._anchor(snapshots, now)

    def handle(
        self,
        command: Command | PlaybackCommand,
        snapshots: TraceSnapshots,
        now: float,
        loaded: bool,
    ) -> None:
        """Apply one command (commands a replay cannot honour are ignored)."""
        match command:
            case Pause():
                self.playing = False
            case Resume():
                if loaded and snapshots and self.position >= len(snapshots) - 1:
                    self.position = 0  # play again from the start, as a player does at the end
                self.playing = True
                self._anchor(snapshots, now)
            case SingleStep():
                self.playing = False
                self._move(snapshots, self.position + 1, now)
            case StepForward(count=count):
                self.playing = False
                self._move(snapshots, self.position + count, now)
            case StepBack(count=count):
                self.playing = False
                self._move(snapshots, self.position - count, now)
            case Seek(step=step):
                if snapshots:
                    self._move(snapshots, snapshots.index_of_step(step), now)
            case SeekStart():
                self._move(snapshots, 0, now)
            case SeekEnd():
                self._move(snapshots, len(snapshots) - 1, now)
            case SetSpeed(speed=speed):
                try:
                    self.set_speed(speed, snapshots, now)
                except ValueError as exc:
                    log.warning("%s", exc)
            case _:
                log.debug("replay ignores %r", command)

    def set_speed(self, speed: float, snapshots: TraceSnapshots, now: float) -> None:
        self.speed = check_speed(speed)
        self._anchor(snapshots, now)

    def advance(self, snapshots: TraceSnapshots, now: float, loaded: bool) -> None:
        """Move to the snapshot due at ``now``; stop playing at the end of a loaded trace."""
        if not self.playing or not snapshots:
            return
        if not self._anchored:
            self._anchor(snapshots, now)
        target = self._anchor_clock + (now - self._anchor_wall) * self.speed
        self.position = snapshots.last_index_at(target, lo=self.position)
        if loaded and self.position >= len(snapshots) - 1:
            self.playing = False

    def due_in(self, snapshots: TraceSnapshots, now: float) -> float | None:
        """Seconds until the next snapshot is due, or None when nothing is coming."""
        if not self.playing or self.position + 1 >= len(snapshots):
            return None
        next_clock = snapshots.play_clock_at(self.position + 1)
        due = self._anchor_wall + (next_clock - self._anchor_clock) / self.speed
        return max(0.0, due - now)


def trace_note(header: Mapping[str, Any]) -> str | None:
    """What a trace is, when a user should know it before reading it: a flight recording
    (why it was written, where it opens) or a later part of a rotated recording."""
    flight = header.get("flight")
    if isinstance(flight, dict):
        held = flight.get("held")
        around = f" with the {held:.0f} s before it" if isinstance(held, int | float) else ""
        note = (
            f"Flight recording: {flight.get('why', flight.get('kind', '?'))}. It opens at step "
            f"{flight.get('step')}{around} and what followed."
        )
        short = flight.get("short")
        return f"{note} Note: {short}." if short else note
    part = header.get("part")
    if isinstance(part, int):
        listed = header.get("previous")  # a list of names, unless the file was tampered with
        previous = [str(name) for name in listed] if isinstance(listed, list) else []
        before = ", ".join(previous) if previous else "removed (--record-keep)"
        return f"Part {part} of a rotated recording; it begins mid-run. Before it: {before}."
    return None


class ReplaySource:
    """Plays a trace back on its own thread; implements ``SnapshotSource``.

    ``trace`` is a path (read on the replay thread after the header is checked here, so a
    file that is not a trace raises :class:`~stepview.trace.format.TraceError` at once) or a
    :class:`~stepview.trace.store.Trace` already loaded. Snapshots are shown exactly as
    recorded; where playback is (position, speed, playing) is :attr:`status`.
    """

    accepts_requests = False

    def __init__(
        self,
        trace: Trace | str | os.PathLike[str],
        *,
        speed: float = 1.0,
        start_paused: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(trace, Trace):
            self._reader: TraceReader | None = None
            self._trace = trace
        else:
            self._reader = TraceReader(trace)
            self._trace = self._reader.trace
        self._clock = clock
        header = self._trace.header
        self._note = trace_note(header)
        flight = header.get("flight")
        # A flight recording opens paused at the step it was written for.
        self._opens_at: int | None = flight.get("step") if isinstance(flight, dict) else None
        playing = not start_paused and self._opens_at is None
        self._playback = Playback(speed=speed, playing=playing)
        self._commands: queue.SimpleQueue[Command | PlaybackCommand] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepview-replay", daemon=True)
        self._error: str | None = None
        self._shown = -1
        self._latest = replace(
            start_snapshot(self._trace.info),
            phase=f"loading trace {self._trace.path or ''}".strip(),
        )
        self._status = self._make_status()

    # -- SnapshotSource ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def latest(self) -> StepSnapshot:
        return self._latest

    def history(self) -> Sequence[StepSnapshot]:
        """Every snapshot read so far (the whole trace once loaded), oldest first."""
        return self._trace.snapshots

    def send(self, command: Command | PlaybackCommand) -> None:
        self._commands.put(command)

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._commands.put(Shutdown())
        if self._thread.is_alive():
            self._thread.join(timeout)
        elif self._reader is not None and self._thread.ident is None:
            self._reader.close()  # never started: the thread would have closed it

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- playback ----------------------------------------------------------------------------

    @property
    def trace(self) -> Trace:
        return self._trace

    @property
    def status(self) -> PlaybackStatus:
        """Position, speed and loading progress (updated by the replay thread)."""
        return self._status

    @property
    def error(self) -> str | None:
        """Why the replay thread failed, if it did."""
        return self._error

    def set_speed(self, speed: float) -> None:
        """Play at ``speed`` times the recorded pace; raises ``ValueError`` unless > 0."""
        self.send(SetSpeed(check_speed(speed)))

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _loaded(self) -> bool:
        """The whole trace is read (a :class:`Trace` given whole counts as read)."""
        return self._reader is None or self._trace.complete

    def _make_status(self) -> PlaybackStatus:
        playback = self._playback
        return PlaybackStatus(
            position=max(0, self._shown),
            count=len(self._trace.snapshots),
            playing=playback.playing,
            speed=playback.speed,
            loaded=self._loaded(),
            warning=self._trace.warning,
            note=self._note,
            stacks=tuple(self._trace.stacks),
        )

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # show it like an engine failure, never kill the app
            log.error("replay failed\n%s", traceback.format_exc())
            self._error = f"replay failed: {describe(exc)}"
            # What was shown stays, as a live engine's failure keeps its requests on screen.
            self._latest = replace(self._latest, engine_state=EngineState.ERROR, phase=self._error)
        finally:
            if self._reader is not None:
                self._reader.close()

    def _loop(self) -> None:
        playback = self._playback
        reader = self._reader
        while not self._stopping.is_set():
            if reader is not None and not self._trace.complete:
                reader.read(LOAD_CHUNK)
            snapshots = self._trace.snapshots
            loaded = self._loaded()
            self._open_at_flight_step(snapshots, loaded)
            playback.advance(snapshots, self._clock(), loaded)
            self._show(snapshots, loaded)
            if not loaded:
                wait = 0.0
            else:
                due = playback.due_in(snapshots, self._clock())
                wait = IDLE_WAIT_S if due is None else min(due, IDLE_WAIT_S)
            self._drain(wait)

    def _open_at_flight_step(self, snapshots: TraceSnapshots, loaded: bool) -> None:
        """Once the trace is read up to it, show the step a flight recording was written for."""
        step = self._opens_at
        if (
            step is None
            or not snapshots
            or (snapshots.step_at(len(snapshots) - 1) < step and not loaded)
        ):
            return
        self._opens_at = None
        self._playback.handle(Seek(step), snapshots, self._clock(), loaded)

    def _drain(self, wait: float) -> None:
        """Handle queued commands, waiting up to ``wait`` seconds for the first one."""
        try:
            command = self._commands.get(timeout=wait) if wait > 0 else self._commands.get_nowait()
            while True:
                if isinstance(command, Shutdown):
                    self._stopping.set()
                    return
                snapshots = self._trace.snapshots
                loaded = self._loaded()
                self._playback.handle(command, snapshots, self._clock(), loaded)
                self._show(snapshots, loaded)
                command = self._commands.get_nowait()
        except queue.Empty:
            return

    def _show(self, snapshots: TraceSnapshots, loaded: bool) -> None:
        position = self._playback.position
        if snapshots and position != self._shown:
            self._shown = position
            self._latest = snapshots[position]
        elif loaded and not snapshots and self._latest.engine_state is EngineState.STARTING:
            self._latest = replace(
                self._latest,
                engine_state=EngineState.STOPPED,
                phase=self._trace.warning or "the trace holds no steps",
            )
        self._status = self._make_status()
