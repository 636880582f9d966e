"""How much of a core the UI may spend drawing new snapshots (the app's ``cpu_budget``).

Kept apart from the app so that its one rule reads on its own, with the figures it is set by:
above the budget a tick is skipped, so a huge batch redraws less often instead of slowing the
engine it shows.
"""

from __future__ import annotations

import time

CPU_BUDGET = 0.05
"""Default ``cpu_budget`` of a live run: the share of one core the UI may spend drawing new
snapshots while the engine runs.

The UI thread and the engine thread share Python's GIL: every millisecond spent drawing is a
millisecond an engine step waits (measured: a UI at 20 % of a core made steps 30 % slower).
Above the budget a tick is skipped, so a huge batch redraws less often instead of slowing the
engine it shows; keys and scrolling are not affected."""
MAX_SKIP_S = 0.5
"""Whatever the budget, a new snapshot is shown at least this often (2 Hz)."""


class DrawBudget:
    """The app's ``cpu_budget`` (``None``: every tick's snapshot is shown, as deterministic
    tests need), measured from when a snapshot was last taken."""

    def __init__(self, budget: float | None, max_skip: float = MAX_SKIP_S) -> None:
        self.budget = budget
        self.max_skip = max_skip
        self._mark = (0.0, 0.0)  # (wall, UI-thread CPU) seconds when a snapshot was last taken

    def over(self) -> bool:
        """Whether drawing since the last snapshot taken used more than the budget of a core
        (never for longer than ``max_skip`` seconds); when not, this snapshot is the mark."""
        if self.budget is None:
            return False
        wall, cpu = time.perf_counter(), time.thread_time()
        last_wall, last_cpu = self._mark
        elapsed = wall - last_wall
        if elapsed < self.max_skip and cpu - last_cpu > self.budget * elapsed:
            return True
        self._mark = (wall, cpu)
        return False
