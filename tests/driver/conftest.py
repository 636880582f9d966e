"""Fixtures shared by the attached-engine tests: a fake plug-in publisher on an ipc socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.driver.attach_helpers import Server, ipc_address


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A publisher playing an engine core's plug-in; killed after the test."""
    s = Server(ipc_address(tmp_path))
    yield s
    s.kill()
