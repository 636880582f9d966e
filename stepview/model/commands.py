"""Commands the UI (or headless runner) sends to the engine driver.

The driver thread is the only code that touches the engine, so every user action
becomes one of these plain, immutable values and travels through a thread-safe queue.
They import neither vLLM nor Textual, so the UI can build them and tests can compare them.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepview.model.chat import Chat
from stepview.model.lineage import Lineage
from stepview.model.sampling import SamplingSpec


@dataclass(frozen=True, slots=True)
class AddRequest:
    """Queue a prompt; it joins the engine at the next step (state *pending* until then).

    ``prompt_token_ids``, when given, is what the engine runs (``prompt`` then only names it):
    a synthetic load needs prompts of an exact token count, which only ids can promise.

    ``messages`` makes it a chat request: the engine applies the model's chat template to them
    and the templated text becomes the request's prompt. ``prompt`` is then empty, so that
    what runs is never in doubt (an engine without a template refuses the request).
    """

    request_id: str
    prompt: str
    spec: SamplingSpec
    prompt_token_ids: tuple[int, ...] = ()
    lineage: Lineage | None = None  # a clone or fork names its parent (shown, and recorded)
    messages: Chat = ()

    def __post_init__(self) -> None:
        if self.messages and (self.prompt or self.prompt_token_ids):
            raise ValueError(
                "a chat request's prompt comes from its messages: give one or the other"
            )


@dataclass(frozen=True, slots=True)
class Arrival:
    """A request and when it arrives: ``at`` seconds after its :class:`Schedule` is received."""

    at: float
    request: AddRequest


@dataclass(frozen=True, slots=True)
class Schedule:
    """Add each request when its time comes, on the driver's clock (a load, a replayed
    arrival pattern). The driver never waits for one: it adds those that are due between
    steps, and sleeps until the next one only when it has nothing else to do."""

    arrivals: tuple[Arrival, ...]


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


Command = AddRequest | Schedule | Abort | Pause | Resume | SingleStep | Shutdown
