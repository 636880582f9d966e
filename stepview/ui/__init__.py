"""The Textual UI: reads snapshots from a source, never imports vLLM or the engine.

``app``
    :class:`~stepview.ui.app.StepviewApp`: the panes over a snapshot source, the timer that
    shows the latest snapshot, the keys; ``stepview.tcss`` is its layout.
``main/``
    the main screen's parts: the request panes, the status bar, the filter, aborting, the
    loading view, and moving through a run's steps (live history or replay).
``detail/``
    one request: the detail screen, its logprob heat-map and its timeline strip.
``dialogs/``
    the add form and its presets, the load dialog, go-to-step, help.
``views/``
    the step view (``v``) and the latency panel (``t``).
``compare/``
    the second app: two recorded runs on one step clock (``--replay A --compare B``).
``fleet/``
    several servers watched at once (``--attach A --attach B``): the fleet screen, and one
    server's full view from it.

Shared by them all: ``display`` (every text drawn from a request), ``plain`` (text another
party chose handed to Textual as written, never read as markup), ``bindings`` (the keys and
which apply), ``footer``, ``scrub`` (where the shown snapshot sits in time), ``drafts``
(clones and forks for the add form), ``theme`` and ``terminal_driver`` (Textual's terminal driver,
made safe for a hang-up: no second writer thread on a terminal that is gone).
"""

from stepview.ui.app import StepviewApp

__all__ = ["StepviewApp"]
