"""An engine core stand-in for the stack tests: the plug-in's stack watch, then a hang.

    python tests/engine/own/stacks_child.py FOLDER HOW

It starts :class:`~stepview.engine.plugin.stacks.StackWatch` on ``FOLDER`` as the plug-in does
in a core stepview started (answering the signal), with a step counter that never moves and
requests always waiting, waits until the watch has armed faulthandler's watchdog, then hangs
in :func:`hang_in_a_step` the way ``HOW`` says: ``gil`` calls libc's ``sleep`` through
``ctypes.PyDLL``, which keeps the GIL (native code nothing else in the process can interrupt),
``wait`` parks on an event (the GIL free). No vLLM: the mechanism, not the engine.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from pathlib import Path

from stepview.engine.plugin.stacks import StackWatch

AFTER_S = 1.0  # a step "hangs" after this long; the watchdog fires after 2 s (after + re-arm)
HANG_S = 120  # longer than any test waits; the test kills the process


def hang_in_a_step(how: str) -> None:
    # Again and again: the signal that asks for the stacks cuts libc's sleep short.
    while True:
        if how == "gil":
            ctypes.PyDLL(None).sleep(HANG_S)
        else:
            threading.Event().wait(HANG_S)


def main(folder: Path, how: str) -> None:
    watch = StackWatch(lambda: 0, lambda: True, folder=folder, after=AFTER_S, wake=0.1)
    watch.start(answer_signal=True)
    while watch._armed_at is None:  # the watch's first wake arms the watchdog
        time.sleep(0.01)
    print("hanging", flush=True)
    hang_in_a_step(how)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
