"""vLLM's OpenAI-compatible API as far as stepview uses it, played by a stdlib HTTP server.

Same routes, JSON shapes and statuses as vLLM's server: ``GET /v1/models`` and
``/version``; ``POST /v1/completions`` (answered when a test says so) and ``POST
/detokenize`` (``{"model", "tokens"}`` -> ``{"prompt": text}``, decoded by
:func:`fake_text`; an unknown model is vLLM's 404 error answer); any other route is
FastAPI's 404 ``{"detail": "Not Found"}``, as is ``/detokenize`` on a server playing one
without it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models

MODEL = "tiny"


def fake_text(token_ids: Sequence[int]) -> str:
    """What the fake tokenizer decodes ``token_ids`` into: one word per token."""
    return "".join(f" w{t}" for t in token_ids)


def _error(message: str, kind: str, code: int) -> dict[str, Any]:
    """vLLM's ``ErrorResponse``."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class FakeApi:
    """The server; ``posts``: every POST's path, ``bodies``: completions asked, ``detokenized``:
    token lists decoded.

    ``release`` holds completions' answers; ``decoding`` holds ``/detokenize`` answers
    (set: answered at once), and ``one_by_one``, when given, lets them through one per
    ``release()``; ``has_detokenize`` False plays a server without that route;
    ``detokenize_status`` other than 200 answers with that error, ``failing`` the next N calls
    with 503; ``hang_up`` closes each connection right after a ``/detokenize`` answer without
    saying so, as uvicorn closes a kept-alive connection that stayed idle.
    """

    def __init__(self) -> None:
        self.posts: list[str] = []  # every POST's path, answered or not
        self.bodies: list[dict[str, Any]] = []
        self.detokenized: list[list[int]] = []
        self.release = threading.Event()
        self.decoding = threading.Event()
        self.decoding.set()
        self.has_detokenize = True
        self.detokenize_status = 200
        self.hang_up = False
        self.one_by_one: threading.Semaphore | None = None
        self.refuse: str | None = None
        self.answer: dict[str, Any] = {}
        self.api_key: str | None = None  # set: /v1 routes want it, as vLLM's --api-key does
        self.authorizations: list[str | None] = []  # each call's Authorization header
        self.root = ""  # the folder /v1/models says the model was loaded from (vLLM's root)
        self.failing = 0  # /detokenize calls still to answer 503 (a server in trouble)
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # kept-alive connections, as uvicorn's

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _refused(self) -> bool:
                """vLLM's AuthenticationMiddleware: 401 on /v1 without the right key."""
                header = self.headers.get("Authorization")
                api.authorizations.append(header)
                if api.api_key is None or not self.path.startswith("/v1"):
                    return False
                if header == f"Bearer {api.api_key}":
                    return False
                self._send(401, {"error": "Unauthorized"})
                return True

            def do_GET(self) -> None:
                if self._refused():
                    return
                if self.path == "/v1/models":
                    model: dict[str, Any] = {"id": MODEL, "max_model_len": 512}
                    if api.root:
                        model["root"] = api.root
                    self._send(200, {"data": [model]})
                elif self.path == "/version":
                    self._send(200, {"version": "0.32.0"})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                api.posts.append(self.path)
                if self._refused():
                    return
                if self.path == "/v1/completions":
                    self._complete(body)
                elif self.path == "/detokenize" and api.has_detokenize:
                    self._detokenize(body)
                else:
                    self._send(404, {"detail": "Not Found"})

            def _complete(self, body: dict[str, Any]) -> None:
                api.bodies.append(body)
                if api.refuse is not None:
                    self._send(400, _error(api.refuse, "BadRequestError", 400))
                    return
                api.release.wait()
                self._send(200, api.answer)

            def _detokenize(self, body: dict[str, Any]) -> None:
                api.decoding.wait()
                if api.one_by_one is not None:
                    api.one_by_one.acquire()
                api.detokenized.append(list(body["tokens"]))
                if body.get("model") not in (None, MODEL):
                    message = f"The model `{body['model']}` does not exist."
                    self._send(404, _error(message, "NotFoundError", 404))
                elif api.detokenize_status != 200 or api.failing > 0:
                    api.failing -= 1
                    status = 503 if api.detokenize_status == 200 else api.detokenize_status
                    self._send(status, _error("it went wrong", "InternalServerError", status))
                else:
                    self._send(200, {"prompt": fake_text(body["tokens"])})
                self.close_connection = api.hang_up

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.decoding.set()
        self.server.shutdown()
        self.server.server_close()


def write_tokenizer(folder: Path, word: str, size: int = 200) -> Path:
    """A tokenizer of ``size`` tokens in ``folder``, whose token ``t`` reads `` {word}{t}``
    (the fake server's: ``w``)."""
    vocab = {f" {word}{t}": t for t in range(size)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=None))
    tokenizer.decoder = decoders.Fuse()  # the tokens' strings end to end, as byte-level BPE
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"clean_up_tokenization_spaces": False})
    )
    return folder
