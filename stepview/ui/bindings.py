"""The app's keys, and which of them apply: plain tables and one plain function.

:func:`action_enabled` is the whole "which keys are usable now" decision, from plain values
(what the keys are pressed over, whether the run is live, looked back at or replayed, the
engine's state), so it is tested without starting an app. ``StepviewApp.check_action`` only
gathers those values.

The footer shows the keys a newcomer needs: Add and Demo to get going, pause and step, ``[``
to look back, and the two views that answer "what did this step do" (``v``) and "where did
the time go" (``t``). Abort, which needs a chosen row anyway, and the rest of the history
keys are on the help screen, and the HISTORY banner names the way back. A live run's footer
takes 89 columns; on a narrower terminal it leaves out :data:`FOOTER_DROP_ORDER`.
"""

from __future__ import annotations

from enum import StrEnum

from textual.binding import Binding, BindingType

from stepview.model.snapshot import EngineState
from stepview.ui.scrub import Mode

ENGINE_BINDINGS: list[BindingType] = [
    Binding("a", "add", "Add", tooltip="Add a prompt (form with presets)"),
    Binding("p,space", "pause", "Pause", tooltip="Pause or resume (replay: play or pause)"),
    Binding("s", "step", "Step", tooltip="One step while paused (replay: one forward)"),
    Binding("x", "abort", "Abort", show=False, tooltip="Abort the selected request"),
    Binding(
        "c",
        "clone",
        "Clone",
        show=False,
        tooltip="Clone the selected request into the add form",
    ),
    Binding("d", "demo", "Demo", tooltip="Queue the seed example's three prompts"),
    Binding(
        "D",
        "demo(True)",
        "Demo chat",
        show=False,
        tooltip="The demo prompts as chat (chat template)",
    ),
    Binding(
        "w",
        "load",
        "Load",
        show=False,
        tooltip="Synthetic load: N requests at a rate, random lengths (dialog)",
    ),
]
"""Keys that act on the engine (in a replay: on playback, or say why they do nothing)."""

TIME_BINDINGS: list[BindingType] = [
    Binding(
        "left_square_bracket",
        "older(1)",
        "Prev",
        key_display="[",
        tooltip="One step back; a live engine keeps running",
    ),
    Binding(
        "right_square_bracket",
        "newer(1)",
        "Forward",
        key_display="]",
        show=False,
        tooltip="One step forward; past the newest is live",
    ),
    Binding(
        "left_curly_bracket",
        "older(10)",
        "Back 10",
        key_display="{",
        show=False,
        tooltip="Ten steps back",
    ),
    Binding(
        "right_curly_bracket",
        "newer(10)",
        "Forward 10",
        key_display="}",
        show=False,
        tooltip="Ten steps forward",
    ),
    Binding(
        "less_than_sign",
        "oldest",
        "Oldest",
        key_display="<",
        show=False,
        tooltip="The oldest step kept (replay: the first)",
    ),
    Binding(
        "L,greater_than_sign",
        "newest",
        "Live",
        show=False,
        tooltip="Back to live (replay: the last step)",
    ),
    Binding(
        "colon",
        "goto",
        "Go to step",
        key_display=":",
        show=False,
        tooltip="Go to a step number",
    ),
    Binding(
        "plus,equals_sign",
        "speed(True)",
        "Faster",
        key_display="+",
        show=False,
        tooltip="Replay faster (up to 16x)",
    ),
    Binding(
        "minus",
        "speed(False)",
        "Slower",
        key_display="-",
        show=False,
        tooltip="Replay slower (down to 0.25x)",
    ),
]
"""Keys that move through time: the history of a live run, or a replay's playback."""

VIEW_BINDINGS: list[BindingType] = [
    Binding(
        "v",
        "step_view",
        "Step view",
        tooltip="The step on screen: token budget, scheduled, preempted, waiting and why",
    ),
    Binding(
        "t",
        "latency",
        "Latency",
        tooltip="Latency percentiles (queue, TTFT, inter-token, e2e, tok/s) and a histogram",
    ),
]
"""Read-only views of the step on screen; they work live, looking back and in a replay."""

APP_BINDINGS: list[BindingType] = [
    *ENGINE_BINDINGS,
    *TIME_BINDINGS,
    *VIEW_BINDINGS,
    Binding(
        "slash",
        "filter",
        "Filter",
        key_display="/",
        tooltip="Filter by text, or by is:STATE (is:aborted, is:length)",
    ),
    Binding(
        "F",
        "flight",
        "Flight",
        show=False,
        tooltip="Write the flight recorder's last minutes as a trace (--flight-recorder)",
    ),
    Binding(
        "K",
        "stacks",
        "Stacks",
        show=False,
        tooltip="Replay of a flight recording: the engine core's thread stacks it holds",
    ),
    Binding("question_mark", "help", "Help", key_display="?", tooltip="This help"),
    Binding("q", "quit", "Quit", tooltip="Stop the engine and quit"),
    # In a terminal, ctrl+c means "stop this program": unlike q it also works over the
    # form and the help, where Textual would copy text (and only hint at ctrl+q).
    # A system binding: the README names it beside q, the help lists the app's own keys.
    Binding(
        "ctrl+c",
        "interrupt",
        "Quit",
        show=False,
        priority=True,
        system=True,
        tooltip="Stop the engine and quit, from any screen",
    ),
    Binding(
        "tab",
        "focus_next",
        "Next pane",
        show=False,
        tooltip="Next pane (Pending, Running, Finished)",
    ),
    Binding("shift+tab", "focus_previous", "Previous pane", show=False, tooltip="Previous pane"),
    # Over a source that takes no requests (a replay) Add, Demo, Load, Clone and the detail
    # view's Fork leave the footer; their keys fall through to this one, which says why they
    # do nothing. Not on the help screen.
    Binding("a,c,d,f,w", "read_only", show=False, system=True),
]
"""Every key of the app itself (``StepviewApp.BINDINGS``)."""

FOOTER_DROP_ORDER = ("demo", "filter")
"""Footer keys left out, in this order, while the footer does not fit the terminal.

Demo first: until the first request the Pending pane's hint names ``d``, and after it
the demo prompts are one more batch. Then the filter: ``/`` is the usual key for it."""

NEWCOMER_HINT = "none yet: press d for the demo prompts, a to add one, ? for help"
"""What an empty live run says in its Pending pane, until the first request arrives."""

# Keys of the panes and the detail view. Over a modal they are off (letters belong to the
# form's fields); over the error screen only quitting makes sense.
MAIN_ACTIONS = frozenset(
    {"add", "clone", "fork", "pause", "step", "abort", "demo", "load", "filter", "help", "quit"}
    | {"read_only"}
    | {"older", "newer", "oldest", "newest", "goto", "speed"}
    | {"step_view", "latency"}
)
# Keys that add requests, and the one that takes their keys where nothing can be added.
_WRITING_ACTIONS = frozenset({"add", "clone", "fork", "demo", "load", "read_only"})
# Keys that need a live engine: dimmed while it starts and after it failed or stopped.
_ENGINE_ACTIONS = frozenset({"add", "clone", "fork", "pause", "step", "abort", "demo", "load"})
_NO_ENGINE = frozenset({EngineState.STARTING, EngineState.ERROR, EngineState.STOPPED})
# Keys that move through time; they need at least one step to move over.
_TIME_ACTIONS = frozenset({"older", "newer", "oldest", "newest", "goto"})
# Keys that only a recording can honour (a live engine has one speed: as fast as it can).
_REPLAY_ACTIONS = frozenset({"speed"})
# Keys a replay honours once it has a snapshot to move over.
_PLAYBACK_ACTIONS = _TIME_ACTIONS | _REPLAY_ACTIONS | {"pause", "step"}


class Over(StrEnum):
    """What the app's keys are pressed over."""

    PANES = "panes"  # the main screen
    DETAIL = "detail"  # a full screen of its own above the panes (the detail view)
    MODAL = "modal"  # a form, the help, go-to-step: letters belong to it
    ERROR = "error"  # the engine failed: its message, and the way out


def action_enabled(
    action: str,
    *,
    over: Over,
    mode: Mode,
    engine: EngineState,
    ready: bool,
    writable: bool = True,
) -> bool | None:
    """True: the key is shown and works; None: shown dimmed (not *now*); False: hidden.

    ``engine`` is the state of the newest snapshot pulled (keys act on the engine, not on
    the step on screen); ``ready`` says a replay has read a snapshot to move over (a live
    run is ready once its engine has started, which ``engine`` says); ``writable`` says the
    source takes requests (a replay does not: Add and Demo are hidden, ``read_only`` has
    their keys).
    """
    if action not in MAIN_ACTIONS:
        return True
    if over is Over.MODAL:
        return False
    if over is Over.ERROR:
        return action == "quit"
    if action in _WRITING_ACTIONS and (action == "read_only") == writable:
        return False
    if action == "filter" and over is not Over.PANES:
        return False  # the filter bar belongs to the panes
    if action == "fork" and over is not Over.DETAIL:
        return False  # forking needs the detail view's token cursor
    if action in _REPLAY_ACTIONS and mode is not Mode.REPLAY:
        return False
    if mode is Mode.REPLAY:
        # Playback keys work on any recorded state (start-up included) once the trace
        # has a snapshot; abort (never in the footer) stays on to say why it does nothing.
        if action in _PLAYBACK_ACTIONS:
            return True if ready else None
        return True
    if action in _TIME_ACTIONS:
        if engine is EngineState.STARTING:
            return None
        return None if action in {"newer", "newest"} and mode is Mode.LIVE else True
    if action in _ENGINE_ACTIONS and engine in _NO_ENGINE:
        return None
    if action == "step" and engine is not EngineState.PAUSED:
        return None
    return True
