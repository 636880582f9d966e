"""How an exception is told to the user: one line, the same in every part of stepview.

A failure reaches the user as a phase line in the TUI, a line on stderr, or a rejected
request's error; each shows the exception's class (``OSError``, ``VLLMValidationError``) so the
message can be searched for, followed by its text when it has any.
"""

from __future__ import annotations


def describe(exc: BaseException) -> str:
    """``"ValueError: bad thing"``, or only ``"ValueError"`` when the message is empty."""
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
