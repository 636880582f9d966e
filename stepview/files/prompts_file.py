"""Reading ``--prompts``: a JSONL file, or standard input for ``-``, checked line by line.

The format of one line (and the seed prompts) is plain data, in :mod:`stepview.model.prompts`;
this is the part that touches the outside: opening the file without hanging on a pipe nobody
writes to, reading standard input as every Unix tool does for ``-`` (``generate | stepview
--headless --prompts -``), and naming the place and line of a problem (``p.jsonl:3: ...``,
``<stdin>:3: ...``). Every line is checked before anything runs, so a typo on line 9,000 does
not surface after 8,999 requests have been served.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from stepview.model.commands import AddRequest, Arrival, Command, Schedule
from stepview.model.prompts import parse_prompt_line
from stepview.model.sampling import DEFAULT_MAX_LOGPROBS

STDIN = Path("-")
"""``--prompts -``: the prompts come on standard input (a file named ``-`` is ``./-``)."""

STDIN_NAME = "<stdin>"
"""How a message names standard input, where it would name the file (Python's own word)."""


class PromptsFileError(Exception):
    """A prompts file that cannot be used; the message names the file and line."""


def read_prompts(path: Path, max_logprobs: int = DEFAULT_MAX_LOGPROBS) -> list[AddRequest]:
    """Every request of a prompts file, ``"at"`` or not (see :func:`read_timed_prompts`)."""
    return [request for _, request in read_timed_prompts(path, max_logprobs)]


def prompt_commands(path: Path, max_logprobs: int = DEFAULT_MAX_LOGPROBS) -> list[Command]:
    """A prompts file as commands for the driver: the lines without ``"at"`` as
    :class:`AddRequest` (added at once), those with it in one :class:`Schedule`."""
    timed = read_timed_prompts(path, max_logprobs)
    commands: list[Command] = [request for at, request in timed if at is None]
    arrivals = tuple(Arrival(at, request) for at, request in timed if at is not None)
    if arrivals:
        commands.append(Schedule(arrivals))
    return commands


def read_timed_prompts(
    path: Path, max_logprobs: int = DEFAULT_MAX_LOGPROBS
) -> list[tuple[float | None, AddRequest]]:
    """Read and check a whole prompts file (:data:`STDIN`: standard input, to its end): each
    request with its ``"at"`` (``None``: at once).

    :class:`PromptsFileError` names the first bad line.
    """
    stdin = path == STDIN
    try:
        raw_lines = _read_stdin() if stdin else _read_lines(path)
    except OSError as exc:
        what = "from standard input" if stdin else f"file {path}"
        raise PromptsFileError(f"cannot read prompts {what}: {exc.strerror or exc}") from None
    where = STDIN_NAME if stdin else str(path)
    requests = parse_prompts(raw_lines, where, max_logprobs)
    if not requests:
        raise PromptsFileError(f"{where}: no prompts in the {'input' if stdin else 'file'}")
    return requests


def parse_prompts(
    raw_lines: Iterable[bytes], where: str, max_logprobs: int = DEFAULT_MAX_LOGPROBS
) -> list[tuple[float | None, AddRequest]]:
    """Check every line of a prompts file read as ``raw_lines``; ``where`` names it in the
    :class:`PromptsFileError` for the first bad line. Empty when every line is blank or a
    comment (the caller says where there were none).

    Lines come as bytes and are decoded one by one, so an encoding error names its line.
    """
    requests: list[tuple[float | None, AddRequest]] = []
    seen: set[str] = set()
    for number, raw in enumerate(raw_lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PromptsFileError(
                f"{where}:{number}: not UTF-8 text (byte {exc.start + 1} of the line)"
            ) from None
        try:
            parsed = parse_prompt_line(text, max_logprobs)
        except ValueError as exc:
            raise PromptsFileError(f"{where}:{number}: {exc}") from None
        if parsed is None:
            continue
        request_id = parsed.request_id or str(len(requests))
        if request_id in seen:
            raise PromptsFileError(f"{where}:{number}: duplicate id {request_id!r}")
        seen.add(request_id)
        requests.append((parsed.at, parsed.request(request_id)))
    return requests


def _read_lines(path: Path) -> list[bytes]:
    """The file's lines as bytes.

    Opened non-blocking: a named pipe that nobody writes to would otherwise hang the start
    with a blank terminal; read this way it is simply empty. A pipe with a writer (``--prompts
    <(generate)``) is read in full, blocking as usual once open.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as handle:
            return handle.readlines()
    finally:
        os.close(fd)


def _read_stdin() -> list[bytes]:
    """Standard input's lines as bytes, up to its end (Ctrl+D on a terminal, as for ``cat``).

    Read whole before the engine starts, like a file: the prompts are checked first, and
    a writer that is slow to finish only delays the start.
    """
    stream = sys.stdin
    if stream is None:  # the process was started with descriptor 0 closed
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    return stream.buffer.readlines()
