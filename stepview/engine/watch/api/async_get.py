"""A page read with no thread waiting for it: ``GET`` on asyncio's streams, for a fleet's
event loop (:mod:`~stepview.engine.watch.fleet.fleet_pool`).

A thread per ``/metrics`` page does not scale to a fleet of a thousand servers: one that is down
or hung holds its thread for as long as the timeout. Here one event loop reads every page;
a server that does not answer costs a socket and a timer until its deadline. The request is
HTTP/1.0 (the server closes the connection after the body: no chunked encoding, no
keep-alive to follow), the whole exchange (connect, send, read) has one deadline, the body a
size limit, and what goes wrong is said as :class:`~stepview.engine.watch.api.server_api.ServerApi`
says it (the same :class:`ApiError`, the same words for an error status).
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl

from stepview.engine.watch.api.server_api import ApiError, ServerApi
from stepview.model.errors import describe

MAX_PAGE_BYTES = 32 * 2**20
"""A page larger than this is refused (vLLM's, with many data-parallel ranks: ~1 MB)."""
_CHUNK = 2**16


@functools.cache
def _tls() -> ssl.SSLContext:
    """The default context, verified as ``http.client`` verifies (built once: loading the
    certificates takes milliseconds)."""
    return ssl.create_default_context()


async def get_text(api: ServerApi, path: str, timeout: float) -> str:
    """The page at ``path`` (the key presented), within ``timeout`` s; :class:`ApiError`."""
    host, port, tls, prefix = api.endpoint
    named = f"[{host}]" if ":" in host else host
    headers = {"Host": f"{named}:{port}", "Accept-Encoding": "identity", "Connection": "close"}
    if api.api_key is not None:
        headers.update(api.api_key.header())
    request = f"GET {prefix}{path} HTTP/1.0\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()
    )
    try:
        async with asyncio.timeout(timeout):
            raw = await _exchange(host, port, tls, (request + "\r\n").encode("latin-1"))
    except TimeoutError:
        raise ApiError(f"{api.base_url}: TimeoutError: timed out") from None
    except OSError as exc:  # as http.client words it: the errno's text, not asyncio's
        said = (
            describe(exc)
            if exc.errno is None
            else f"{type(exc).__name__}: " + (f"[Errno {exc.errno}] {os.strerror(exc.errno)}")
        )
        raise ApiError(f"{api.base_url}: {said}") from exc
    except ValueError as exc:  # not HTTP, or too long
        raise ApiError(f"{api.base_url}: {exc}") from exc
    status, reason, body = raw
    return api.answered(status, reason, body).decode("utf-8", "replace")


async def _exchange(host: str, port: int, tls: bool, request: bytes) -> tuple[int, str, bytes]:
    """Send ``request``; the answer's status, reason and body."""
    reader, writer = await asyncio.open_connection(host, port, ssl=_tls() if tls else None)
    try:
        writer.write(request)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            raise ValueError("not an HTTP answer") from None
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ValueError("not an HTTP answer")
        chunks: list[bytes] = []
        size = 0
        while chunk := await reader.read(_CHUNK):
            size += len(chunk)
            if size > MAX_PAGE_BYTES:
                raise ValueError(f"a page over {MAX_PAGE_BYTES // 2**20} MB")
            chunks.append(chunk)
        return int(parts[1]), parts[2] if len(parts) > 2 else "", b"".join(chunks)
    finally:
        writer.close()
