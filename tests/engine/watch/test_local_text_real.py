"""A watch on the server's machine decodes other clients' text with the server's own tokenizer.

The shared API server with the plug-in (the demo model, loaded from a folder on this machine)
says in ``/v1/models`` where its model is; the watch reads that tokenizer, checks it against
the server's ``/detokenize`` on a few probes as it starts and decodes every text itself. Here:
it decodes what the server decodes (special tokens, a character split across tokens, ids at
random), and a headless watch with ``--api`` writes every completion's text as vLLM's own
answer has it, having asked the server to decode its probes only.
"""

from __future__ import annotations

import json
import random
import signal
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stepview.engine.watch.api.server_api import ServerApi
from stepview.engine.watch.link.local_text import AGREED, served_tokenizer
from stepview.testing.vllm_server import complete
from tests.engine.watch.attach_helpers import EXIT_S, watch_command, watching
from tests.servers import Served

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

COUNT = 12


def test_the_served_tokenizer_read_here_decodes_as_the_server_does(plugged_server: Served) -> None:
    api = ServerApi(plugged_server.url + "/v1/")
    local = served_tokenizer(api)
    assert local is not None, api.model()
    assert api.detokenize(api_tokens(api, "héllo wörld")) == "héllo wörld"  # a round trip
    rng = random.Random(7)
    cases = [
        api_tokens(api, "<|im_start|>user\nhi<|im_end|>"),  # special tokens, kept
        api_tokens(api, "naïve café 日本語 🙂")[:-1],  # a character cut in the middle
        [rng.randrange(0, 2000) for _ in range(40)],
        [0, 0, 1, 2],
    ]
    for ids in cases:
        assert local.decode(ids) == api.detokenize(ids), ids


def api_tokens(api: ServerApi, text: str) -> list[int]:
    """The server's token ids for ``text`` (its ``/tokenize``)."""
    body = json.dumps({"model": api.model().name, "prompt": text}).encode()
    headers = {"Content-Type": "application/json"}
    asked = urllib.request.Request(api.base_url + "/tokenize", body, headers)
    with urllib.request.urlopen(asked, timeout=60) as answer:
        return [int(t) for t in json.load(answer)["tokens"]]


def detokenize_calls(served: Served) -> int:
    """``/detokenize`` calls the server has answered (its access log)."""
    return served.api.log.read_text(errors="replace").count("POST /detokenize")


def test_a_watch_beside_the_server_writes_vllms_text_asking_it_only_its_probes(
    plugged_server: Served, tmp_path: Path
) -> None:
    assert plugged_server.publish is not None
    results = tmp_path / "results.jsonl"
    command = [
        *watch_command(plugged_server.publish, tmp_path),
        *("--api", plugged_server.url, "--results", str(results)),
    ]
    port = plugged_server.api.port
    calls_before = detokenize_calls(plugged_server)
    with watching(command) as watch:
        watch.err.wait_for("watching", timeout=60)
        prompts = [f"Local text {i}: the tide came in" for i in range(COUNT)]
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda p: complete(port, p, 8, ignore_eos=True), prompts))
        said = {a["choices"][0]["text"] for a in answers}
        lines = [
            json.loads(watch.out.wait_for(prompt, timeout=60)) for prompt in prompts
        ]  # the prompt's text is there: decoded
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0
    assert {line["completions"][0]["text"] for line in lines} == said
    log = (tmp_path / "stepview.log").read_text()
    assert "decoded here with the tokenizer in" in log, log[-2000:]
    # 24 texts (a prompt and a completion each): the server decoded only the probes.
    assert detokenize_calls(plugged_server) - calls_before == AGREED
