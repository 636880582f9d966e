"""Reliability tests share the e2e tests' tmux terminal fixture."""

from tests.e2e.conftest import open_terminal

__all__ = ["open_terminal"]
