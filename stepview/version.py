"""Which stepview this is: the distribution's name on PyPI and its installed version.

The PyPI name ``stepview`` belongs to an unrelated project, so stepview is distributed as
``vllm-stepview`` (the command and the import name stay ``stepview``). Reading the version by
the distribution's own name also keeps the other project's, if installed beside, out of it.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "vllm-stepview"


def installed_version() -> str:
    """The installed version (``unknown`` when run from a tree that was never installed)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
