"""Adding prompts to a watched server through its OpenAI-compatible API (``--api URL``).

Attached to a server, stepview does not own the engine: the only way in is the server's own
door, ``POST /v1/completions``, with the add-prompt form's sampling parameters (vLLM's
extensions included: ``top_k``, ``min_p``, ``repetition_penalty``, ``seed``,
``prompt_logprobs``). The request id is chosen here (vLLM's ``request_id`` field), so the
request is recognised in the engine core's records as stepview's own: the server makes its
engine-core id ``cmpl-<id>-0-<8 hex>``.

Each request is one plain HTTP call (stdlib ``http.client``, no extra dependency) on a
thread of its own: a completion takes as long as the engine needs, and the driver thread
that hands requests over must never wait for the network. The answer (the text, token ids
and finish reasons, or the server's refusal) is queued and read back on the driver thread
by :meth:`ServerApi.answers`. Closing a request's connection is how it is aborted: the
server cancels a completion whose client went away.

The same API decodes other clients' token ids into text (``POST /detokenize``, see
:meth:`ServerApi.detokenize` and :mod:`stepview.engine.watch.link.detokenize`).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import queue
import secrets
import socket
import threading
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from stepview.engine.watch.api.api_key import ApiKey, unauthorized_message
from stepview.model.engine_api import CompletionUpdate
from stepview.model.errors import describe
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import RequestState

log = logging.getLogger(__name__)
T = TypeVar("T")

# Looking the model up, and reaching the server at all: a healthy server answers at once.
CONNECT_TIMEOUT_S = 5.0
# A completion may run for long on a busy server; this only bounds a server that hangs.
ANSWER_TIMEOUT_S = 3600.0
# Decoding a few hundred token ids takes the server a millisecond: this bounds a stuck one.
DETOKENIZE_TIMEOUT_S = 2.0


class ApiAnswer(NamedTuple):
    """How one request sent through the API ended, read on the driver thread.

    ``state`` FINISHED carries the samples (``completions``); REJECTED (the server refused
    it, or could not be reached) and ABORTED (the answer was lost) carry ``error``.
    """

    request_id: str
    state: RequestState
    completions: tuple[CompletionUpdate, ...] = ()
    prompt_token_ids: tuple[int, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ServedModel:
    """What ``GET /v1/models`` and ``GET /version`` say about the server."""

    name: str
    max_model_len: int = 0
    vllm_version: str = ""
    root: str = ""  # what the server loaded (its --model), when the name is another


class ApiError(Exception):
    """The server could not be reached, or answered with an error (its message).

    ``lost``: the request was sent and the connection broke before an answer came (the
    server went away while working on it), as opposed to a refusal or no connection at all.
    ``status``: the HTTP status of an error answer (404: the server has no such endpoint).
    """

    def __init__(self, message: str, *, lost: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.lost = lost
        self.status = status


class ServerApi:
    """The server's API at ``base_url`` (``http://HOST:PORT``, with or without ``/v1``),
    presenting ``api_key`` on every call when the server wants one."""

    def __init__(self, base_url: str, api_key: ApiKey | None = None) -> None:
        url = base_url.rstrip("/")
        if url.endswith("/v1"):
            url = url[: -len("/v1")]
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.base_url = url
        self.api_key = api_key
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path
        self._answers: queue.SimpleQueue[ApiAnswer] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._open: dict[str, http.client.HTTPConnection] = {}  # request id -> its connection
        self._aborted: set[str] = set()
        self._model: ServedModel | None = None
        self._token = secrets.token_hex(4)
        self._detokenizing: http.client.HTTPConnection | None = None  # see detokenize()

    # -- HTTP ---------------------------------------------------------------------------------

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _call(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """One call on ``conn``; the decoded JSON answer, or :class:`ApiError` with why."""
        data = None if body is None else json.dumps(body).encode()
        raw = self._exchange(conn, method, path, data)
        try:
            answer = json.loads(raw) if raw else None
        except ValueError:
            answer = None
        if answer is None:
            raise ApiError(f"{method} {path}: not a JSON answer")
        return answer

    def _exchange(
        self, conn: http.client.HTTPConnection, method: str, path: str, data: bytes | None
    ) -> bytes:
        """One call's raw answer, the key presented; :class:`ApiError` for no answer or an
        error status (401: which key to give)."""
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.api_key is not None:
            headers.update(self.api_key.header())
        sent = False
        try:
            conn.request(method, self._prefix + path, body=data, headers=headers)
            sent = True
            response = conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ApiError(f"{self.base_url}: {describe(exc)}", lost=sent) from exc
        if response.status == 401:
            raise ApiError(unauthorized_message(self.api_key), status=401)
        if response.status >= 400:
            try:
                message = _error_message(json.loads(raw)) if raw else None
            except ValueError:
                message = None
            message = message or f"HTTP {response.status} {response.reason}"
            raise ApiError(message, status=response.status)
        return raw

    def get(self, path: str) -> Any:
        conn = self._connection(CONNECT_TIMEOUT_S)
        try:
            return self._call(conn, "GET", path)
        finally:
            conn.close()

    def get_text(self, path: str, timeout: float = CONNECT_TIMEOUT_S) -> str:
        """A plain-text page (``/metrics``), the key presented as for every call."""
        conn = self._connection(timeout)
        try:
            return self._exchange(conn, "GET", path, None).decode("utf-8", "replace")
        finally:
            conn.close()

    # -- the model ----------------------------------------------------------------------------

    def model(self, refresh: bool = False) -> ServedModel:
        """The served model (looked up once, or again with ``refresh``: a server restarted;
        raises :class:`ApiError`)."""
        model = None if refresh else self._model
        if model is None:
            listed = self.get("/v1/models").get("data") or []
            if not listed:
                raise ApiError(f"{self.base_url}/v1/models lists no model")
            first = listed[0]
            version = ""
            with contextlib.suppress(ApiError):  # only shown in the status bar
                version = str(self.get("/version").get("version", ""))
            model = self._model = ServedModel(
                str(first.get("id", "")),
                int(first.get("max_model_len") or 0),
                version,
                str(first.get("root") or ""),
            )
        return model

    def detokenize(self, token_ids: Sequence[int]) -> str:
        """The text of ``token_ids`` as the server's tokenizer decodes them; one thread only.

        vLLM's ``POST /detokenize`` (``{"model", "tokens"}`` -> ``{"prompt": text}``)
        decodes special tokens too (it has no ``skip_special_tokens``). Calls are small and
        many, so one kept-alive connection serves them all; it is opened afresh after a
        failure. The server closes a kept-alive connection that stays idle
        (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``, 5 s), and the first call after such a pause finds
        it reset: that call is made once more on a new connection, as HTTP clients do with a
        pooled connection (the call only reads). Raises :class:`ApiError` (``status`` 404:
        no such endpoint, or model).
        """
        body = {"model": self.model().name, "tokens": list(token_ids)}
        conn = self._detokenizing
        kept = conn is not None
        if conn is None:
            conn = self._detokenizing = self._connection(DETOKENIZE_TIMEOUT_S)
        try:
            answer = self._call(conn, "POST", "/detokenize", body)
        except ApiError as exc:
            conn.close()
            self._detokenizing = None
            if kept and isinstance(exc.__cause__, ConnectionError):
                return self.detokenize(token_ids)  # on a new connection: at most once more
            raise
        text = answer.get("prompt") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise ApiError("/detokenize: no text in the answer")
        return text

    # -- requests -----------------------------------------------------------------------------

    def server_id(self, request_id: str) -> str:
        """The ``request_id`` the server gets for stepview's ``request_id``.

        Made unique per stepview run, so two stepviews adding ``u1`` to one server, or one
        stepview restarted, never mix their requests up.
        """
        return f"stepview-{self._token}-{request_id}"

    def submit(self, request_id: str, prompt: str | list[int], spec: SamplingSpec) -> None:
        """Send the request on a thread of its own; its answer comes from :meth:`answers`.

        ``prompt`` is text, or token ids (a synthetic load's), which the API takes as they are.
        """
        conn = self._connection(ANSWER_TIMEOUT_S)
        with self._lock:
            self._open[request_id] = conn
        thread = threading.Thread(
            target=self._complete,
            args=(conn, request_id, prompt, spec),
            name=f"stepview-api-{request_id}",
            daemon=True,
        )
        thread.start()

    def _complete(
        self,
        conn: http.client.HTTPConnection,
        request_id: str,
        prompt: str | list[int],
        spec: SamplingSpec,
    ) -> None:
        try:
            model = self.model()
            with self._lock:
                if request_id in self._aborted:
                    raise ApiError("aborted before it was sent")
            body = completion_body(model.name, self.server_id(request_id), prompt, spec)
            answer = _answer_of(request_id, self._call(conn, "POST", "/v1/completions", body))
        except ApiError as exc:
            with self._lock:
                aborted = request_id in self._aborted
            if aborted:
                answer = ApiAnswer(request_id, RequestState.ABORTED, error="aborted by the user")
            elif exc.lost:
                answer = ApiAnswer(request_id, RequestState.ABORTED, error=f"server lost: {exc}")
            else:
                answer = ApiAnswer(request_id, RequestState.REJECTED, error=str(exc))
        except Exception as exc:  # a malformed answer: say so, never lose the request
            log.exception("stepview: reading the answer to %s failed", request_id)
            answer = ApiAnswer(request_id, RequestState.ABORTED, error=describe(exc))
        finally:
            with self._lock:
                self._open.pop(request_id, None)
                self._aborted.discard(request_id)
            conn.close()
        self._answers.put(answer)

    def answers(self) -> list[ApiAnswer]:
        """Every answer received since the last call (never blocks)."""
        return drained(self._answers)

    def abort(self, request_id: str) -> bool:
        """Close the request's connection (the server then aborts it); False if not open."""
        with self._lock:
            conn = self._open.get(request_id)
            if conn is None:
                return False
            self._aborted.add(request_id)
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked on the answer
        return True

    def close(self) -> None:
        """Leave requests in flight alone: quitting stepview never touches the server."""


def drained(answers: queue.SimpleQueue[T]) -> list[T]:
    """Everything a worker thread has queued so far, taken out (never blocks)."""
    taken: list[T] = []
    try:
        while True:
            taken.append(answers.get_nowait())
    except queue.Empty:
        return taken


# Sampling fields a body leaves out while they hold a value meaning "not set" (any other is
# sent): so a body says what the user chose and no more. Leaving one out is the same as
# sending it: vLLM's CompletionRequest defaults it to that very value, and the server has no
# default of its own for it. Those it has (from the model's generation config: temperature,
# top_p, top_k, min_p, the penalties) are always sent, "off" included, or the server's
# would replace the user's.
_LEFT_OUT_WHEN: dict[str, tuple[object, ...]] = {
    "seed": (None,),  # a fresh random seed
    "stop": ([],),  # no stop strings
    "logprobs": (None,),  # none returned
    "prompt_logprobs": (None,),
    "ignore_eos": (False,),  # stop at the end-of-sequence token
}


def completion_body(
    model: str, server_id: str, prompt: str | list[int], spec: SamplingSpec
) -> dict[str, Any]:
    """The ``/v1/completions`` body for the form's prompt and sampling parameters.

    Every field of the spec goes under its own name, which is the server's: OpenAI's
    (``temperature``, ``top_p``, ``n``, ``max_tokens``, ``seed``, ``stop``, ``logprobs``,
    the penalties) and vLLM's extensions (``top_k``, ``min_p``, ``repetition_penalty``,
    ``prompt_logprobs``, ``ignore_eos``); tests/engine/records/test_sampling_fields.py checks
    them against vLLM's ``CompletionRequest``, which takes and ignores a name it does not
    know. Those in ``_LEFT_OUT_WHEN`` are left out while unset.
    """
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "request_id": server_id,
        "return_token_ids": True,
    }
    for name, value in spec.to_dict().items():
        if value not in _LEFT_OUT_WHEN.get(name, ()):
            body[name] = value
    return body


def _answer_of(request_id: str, answer: Any) -> ApiAnswer:
    """A completions answer as the request's final samples."""
    choices = sorted(answer.get("choices") or [], key=lambda c: int(c.get("index", 0)))
    completions = tuple(
        CompletionUpdate(
            int(c.get("index", 0)),
            str(c.get("text") or ""),
            tuple(c.get("token_ids") or ()),
            None,
            None,
            c.get("finish_reason"),
            c.get("stop_reason"),
        )
        for c in choices
    )
    prompt_ids = tuple(choices[0].get("prompt_token_ids") or ()) if choices else ()
    return ApiAnswer(request_id, RequestState.FINISHED, completions, prompt_ids)


def _error_message(answer: Any) -> str | None:
    """The message of an OpenAI-style error answer (``{"error": {"message": ...}}``)."""
    if not isinstance(answer, dict):
        return None
    error = answer.get("error", answer)
    if isinstance(error, dict):
        message = error.get("message") or error.get("detail")
        return None if message is None else str(message)
    return str(error) if error else None


def api_client_id(server_id: str) -> str:
    """The client id the engine core's records show for a completion sent with ``server_id``.

    vLLM's completions endpoint names its engine requests ``cmpl-<request_id>-<prompt
    index>``; stepview sends one prompt per request.
    """
    return f"cmpl-{server_id}-0"
