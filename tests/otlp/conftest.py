"""A real OTLP/gRPC receiver per test (stepview.testing.otlp_receiver)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stepview.testing.otlp_receiver import OtlpReceiver


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    served = OtlpReceiver()
    yield served
    served.stop()
