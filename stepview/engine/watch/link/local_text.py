"""Other clients' text decoded here, with the tokenizer the server loaded, once it agreed.

Asking the server (``POST /detokenize``, :mod:`~stepview.engine.watch.link.detokenize`) costs
its API process ~0.8 ms of CPU a text, two texts a request (the prompt, the completion), one
call at a time: beside a server working through a burst of thousands, that is serving time
taken from it, the texts come too late for most requests, and the view, held for them, falls
seconds behind (``benchmarks/long_queue``, docs/performance.md). A watch on the server's own
machine, or one that sees the model on a shared disk, can read the tokenizer the server loaded:
``/v1/models`` names its folder (``root``), and Hugging Face's ``tokenizers`` (which vLLM and
transformers decode with) turns ids into text in microseconds.

Used only once it agreed with the server. As the watch starts (a server is seldom in a burst
then, and answers in a millisecond) it asks the server to decode :data:`AGREED` lists of ids
(:meth:`LocalText.probes`: the vocabulary's first ids, ids drawn across it, and its last ones,
where special tokens sit) and decodes them here too: all alike, and every text is decoded here
from the first. A server that cannot answer then has the first real texts compared instead.
One answer that differs (a server given another ``--tokenizer``, a decoding step not done
here) and the server is asked for everything, as before. Decoding keeps special tokens, as
``/detokenize`` does; a tokenizer whose configuration asks transformers to clean up spaces
after decoding is not used (that step is not redone here).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from stepview.engine.watch.api.server_api import ServerApi

log = logging.getLogger(__name__)

AGREED = 3
"""Texts the server and this machine must have decoded alike before the rest are decoded here."""
PROBE_IDS = 64
"""Ids in each of the lists decoded both ways as the watch starts."""


class TextDecoder(Protocol):
    """Token ids to text, as the server's tokenizer decodes them (special tokens kept)."""

    where: str  # what it decodes with, for the log

    def decode(self, token_ids: Sequence[int]) -> str: ...

    def probes(self) -> list[list[int]]: ...


class LocalText:
    """A ``tokenizers.Tokenizer`` read from the served model's folder."""

    def __init__(self, tokenizer: Any, where: str) -> None:
        self._tokenizer = tokenizer
        self.where = where

    def decode(self, token_ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(token_ids), skip_special_tokens=False))

    def probes(self) -> list[list[int]]:
        """:data:`AGREED` lists of ids to decode both ways before any text is asked."""
        size = int(self._tokenizer.get_vocab_size(with_added_tokens=True))
        drawn = random.Random(size).sample(range(size), min(size, PROBE_IDS))
        last = list(range(max(0, size - PROBE_IDS), size))
        return [list(range(min(size, PROBE_IDS))), drawn, last]


def local_text(folder_name: str) -> LocalText | None:
    """The tokenizer in ``folder_name`` (what ``/v1/models`` says the server loaded), if this
    machine has that folder and can read it; None otherwise: the server is asked, as before."""
    if not folder_name:
        return None
    folder = Path(folder_name).expanduser()
    path = folder / "tokenizer.json"
    if not path.is_file():
        return None  # another machine's folder, a hub id, or a tokenizer without that file
    try:
        config_path = folder / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        if not isinstance(config, dict) or config.get("clean_up_tokenization_spaces"):
            return None
        from tokenizers import Tokenizer  # installed with vLLM and transformers

        return LocalText(Tokenizer.from_file(str(path)), str(folder))
    except Exception as exc:  # unreadable, malformed, or no tokenizers here: ask the server
        log.debug("stepview: the tokenizer in %s is not used here: %r", folder, exc)
        return None


def served_tokenizer(api: ServerApi) -> LocalText | None:
    """The tokenizer of the model the server says it loaded (``root``; else its name, which is
    the folder when the server was started with ``--model FOLDER`` and no other name)."""
    model = api.model()
    return local_text(model.root or model.name)
