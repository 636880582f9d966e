"""Commands the UI (or headless runner) sends to the engine driver.

The driver thread is the only code that touches the engine, so every user action
becomes one of these plain, immutable values and travels through a thread-safe queue.
They import neither vLLM nor Textual, so the UI can build them and tests can compare them.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepview.model.lineage import Lineage
from stepview.model.sampling import SamplingSpec


@dataclass(frozen=True, slots=True)
class AddRequest:
    """Queue a prompt; it joins the engine at the next step (state *pending* until then)."""

    request_id: str
    prompt: str
    spec: SamplingSpec
    lineage: Lineage | None = None  # a clone or fork names its parent (shown, and recorded)


@dataclass(frozen=True, slots=True)
class Abort:
    """Abort a request (pending or in the engine); finished or unknown ids are harmless."""

    request_id: str


@dataclass(frozen=True, slots=True)
class Pause:
    """Stop calling ``step()`` until :class:`Resume` (commands are still accepted)."""


@dataclass(frozen=True, slots=True)
class Resume:
    """Go back to stepping continuously."""


@dataclass(frozen=True, slots=True)
class SingleStep:
    """While paused, run exactly one engine step."""


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Stop between steps, shut the engine down and end the driver thread."""


Command = AddRequest | Abort | Pause | Resume | SingleStep | Shutdown
