"""Reading ``--attach-file``: a plain list of addresses, or Prometheus' ``file_sd`` targets,
and following the latter while the fleet is watched.

Which format a file is in is told by its name, as Prometheus tells a file_sd file
(:func:`~stepview.files.file_sd.syntax_of`): ``*.json`` is file_sd JSON, ``*.yml`` and
``*.yaml`` file_sd YAML, whatever they hold (a ``.json`` file holding YAML is refused, as
Prometheus refuses it); any other name is the plain list (one ``--attach`` address per line,
``#`` comments), read once, as it always was. A file named otherwise that holds target groups
(it opens with ``[``, ``{`` or ``- ``, which no address does) is refused with what to rename
it to: read as a plain list it would be nonsense, and Prometheus would not read it at all.
A file_sd file is read at start (a bad one stops the command, exit 2) and then followed by
:class:`FileFinder`, as Prometheus follows it: servers added to it join the fleet, servers
taken out leave it.

Following is a look at the file's ``stat`` every second and a re-read when it changed
(portable, no inotify; a second is well under what a person editing it notices). A write in
progress must not empty the fleet, so a file that reads empty is taken as one being written
(``[]`` lists no server), and one that does not parse is reported while the servers it listed
last stay (as Prometheus keeps a file's last good targets); both are read again on the next
look, changed or not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stepview.files.file_sd import (
    NOT_FILE_SD_NAME,
    TargetGroupsError,
    looks_like_target_groups,
    parse_target_groups,
    syntax_of,
)
from stepview.model.targets import FILE_SD, Discovery, ListingError, Target

FILE_LOOK_S = 1.0
"""How often a followed file's ``stat`` is looked at."""


class TargetsFileError(ListingError, ValueError):
    """An ``--attach-file`` that cannot be used; the message names the file, in one line."""


@dataclass(frozen=True, slots=True)
class AttachFile:
    """What an ``--attach-file`` holds: plain ``addresses``, or a file_sd ``discovery``
    (followed) with the ``targets`` it lists now."""

    addresses: tuple[str, ...] = ()
    discovery: Discovery | None = None
    targets: tuple[Target, ...] = ()


def read_attach_file(path: Path) -> AttachFile:
    """The file's servers, in either format; :class:`TargetsFileError` when it cannot be
    read, names none (plain list), or is not valid file_sd."""
    text = _read(path)
    name = str(path)
    if syntax_of(name) is not None:
        try:
            targets = parse_target_groups(text, name)
        except TargetGroupsError as exc:
            raise TargetsFileError(str(exc)) from None
        return AttachFile(discovery=Discovery(FILE_SD, name, name), targets=targets)
    if looks_like_target_groups(text):
        raise TargetsFileError(
            f"{path} holds target groups, but {NOT_FILE_SD_NAME} (rename it so; a plain "
            "list of addresses is one per line)"
        )
    found = tuple(
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    if not found:
        raise TargetsFileError(
            f"{path} names no server (one address per line, or Prometheus' file_sd targets)"
        )
    return AttachFile(addresses=found)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TargetsFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TargetsFileError(f"{path} is not UTF-8 text ({exc.reason})") from None


class FileFinder:
    """A file_sd file followed: :meth:`poll` answers its targets when it changed."""

    def __init__(self, discovery: Discovery, interval: float = FILE_LOOK_S) -> None:
        self.name = discovery.name
        self.path = Path(discovery.location)
        self.interval = interval
        self._seen: tuple[int, int, int] | None = None  # mtime_ns, size, inode when last read
        self._again = False  # read again at the next look, changed or not

    def poll(self) -> tuple[Target, ...] | None:
        """The file's targets if it changed since the last answer, ``None`` if not (or while
        it reads empty: being written); :class:`TargetsFileError` when it cannot be read or
        parsed now (the next look reads it again)."""
        try:
            stat = os.stat(self.path)
        except OSError as exc:
            self._again = True
            raise TargetsFileError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        seen = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if seen == self._seen and not self._again:
            return None
        self._again = True
        text = _read(self.path)
        if not text.strip():
            return None
        if not looks_like_target_groups(text):
            raise TargetsFileError(
                f"{self.name} is no longer a file_sd list of target groups (a file followed "
                "stays in the format it started in)"
            )
        try:
            targets = parse_target_groups(text, self.name)
        except TargetGroupsError as exc:
            raise TargetsFileError(str(exc)) from None
        self._seen, self._again = seen, False
        return targets
