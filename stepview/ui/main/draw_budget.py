"""How much of a core the UI may spend drawing new snapshots (the app's ``cpu_budget``).

Kept apart from the app so that its one rule reads on its own: above the budget a tick is
skipped, so a huge batch redraws less often instead of slowing the engine it shows.
"""

from __future__ import annotations

import time

Mark = tuple[float, float]
"""(wall, UI-thread CPU) seconds when a snapshot was last taken."""


def over_budget(budget: float | None, mark: Mark, max_skip: float) -> tuple[bool, Mark]:
    """Whether drawing since ``mark`` used more than ``budget`` of a core (never for longer
    than ``max_skip`` seconds), and the mark to keep (a new one when not over)."""
    if budget is None:
        return False, mark
    wall, cpu = time.perf_counter(), time.thread_time()
    last_wall, last_cpu = mark
    elapsed = wall - last_wall
    if elapsed < max_skip and cpu - last_cpu > budget * elapsed:
        return True, mark
    return False, (wall, cpu)
