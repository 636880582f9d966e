"""The API key a watched server wants, and where it came from, kept out of every output.

A vLLM server started with ``--api-key`` (or ``VLLM_API_KEY``) answers 401 to any call of its
``/v1`` endpoints without ``Authorization: Bearer KEY``. stepview takes the key from its own
``--api-key`` flag, else ``VLLM_API_KEY`` (the server's own variable: one export serves both
on the server's machine), else ``OPENAI_API_KEY`` (what OpenAI clients read), in that order.

The key is a secret of the server's owner: :class:`ApiKey` shows only where it came from
(its ``repr`` and ``str`` never hold it), so no log line, error message, trace or results
record can carry it by accident. A 401 names the places a key is read from
(:func:`unauthorized_message`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

FLAG = "--api-key"
ENV_NAMES = ("VLLM_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key and the place it was read from (``--api-key`` or a variable's name)."""

    source: str
    secret: str = field(repr=False)

    def __str__(self) -> str:
        return f"the API key from {self.source}"

    def header(self) -> dict[str, str]:
        """The HTTP header that presents it."""
        return {"Authorization": f"Bearer {self.secret}"}


def resolve_api_key(flag: str | None, environ: Mapping[str, str] | None = None) -> ApiKey | None:
    """The key to present: ``--api-key``'s, else the first variable of :data:`ENV_NAMES` set
    to something other than blanks; ``None`` when there is none."""
    if flag is not None and flag.strip():
        return ApiKey(FLAG, flag.strip())
    env = os.environ if environ is None else environ
    for name in ENV_NAMES:
        value = env.get(name, "").strip()
        if value:
            return ApiKey(name, value)
    return None


def unauthorized_message(key: ApiKey | None) -> str:
    """What a 401 means to the user: which key to give, or that the one given was refused."""
    if key is None:
        return (
            f"the server wants an API key (401 Unauthorized): give it with {FLAG}, "
            f"or set {' or '.join(ENV_NAMES)}"
        )
    return f"the server refused {key} (401 Unauthorized)"
