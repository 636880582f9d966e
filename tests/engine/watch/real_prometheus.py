"""The real Prometheus (Debian's 2.42) for the discovery tests, started by a test.

A test that needs it and cannot have it fails, saying why: the suite's claim is that stepview
reads what the real server answers, and a skip would let that claim go unchecked in silence.
The server itself is :class:`stepview.testing.prometheus.Prometheus` (the rules' and the
dashboard's tests use it too); here it also scrapes itself (job ``prometheus``, as its
example configuration does), a target that is not vLLM's for discovery to leave out.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from stepview.testing import prometheus


def prometheus_binary() -> str:
    """The ``prometheus`` command, or the test fails saying how to get it."""
    try:
        return prometheus.prometheus_binary()
    except prometheus.PrometheusMissing as missing:
        pytest.fail(str(missing))


@contextlib.contextmanager
def running_prometheus(folder: Path, file_sd: Mapping[str, Path]) -> Iterator[str]:
    """A Prometheus scraping every second the targets listed in each job's file of
    ``file_sd``, and itself; yields its ``HOST:PORT`` once ready."""
    prometheus_binary()
    server = prometheus.Prometheus(folder, file_sd=file_sd, scrape_itself=True)
    try:
        with server:
            yield f"127.0.0.1:{server.port}"
    except RuntimeError as failed:  # it did not start: its log says why
        pytest.fail(str(failed))


def write_targets(path: Path, groups: list[dict[str, Any]]) -> None:
    """Replace a file_sd file whole (a rename), as Prometheus' docs advise."""
    new = path.with_suffix(".new")
    new.write_text(json.dumps(groups))
    os.replace(new, path)
