"""``stepview --help``: stepview's own flags, then vLLM's engine flags.

Two parsers, printed one after the other, because they are two parsers: stepview's own is
plain argparse and needs nothing; vLLM's is vLLM's (its option groups, its help format) and
needs ``import vllm``, so asking for help costs the few seconds of that import.
"""

from __future__ import annotations

import argparse

from stepview.launch.exits import EXIT_OK
from stepview.launch.paths import default_log_path

# vLLM's help formatter prints a description as it is (no wrapping): lines under 80 columns.
ENGINE_HELP = (
    "vLLM engine options: everything else on the command line goes to vLLM's\n"
    "EngineArgs, parsed by vLLM's own parser as in vLLM's llm_engine_example."
)


def print_help(own_help: str) -> int:
    """Print ``own_help`` (stepview's own parser's help), then vLLM's, on stdout; returns
    the exit code."""
    from stepview.engine.own.environment import prepare_vllm_environment

    print(own_help)
    prepare_vllm_environment(default_log_path())
    from stepview.engine.own.engine_args import engine_parser

    engine = engine_parser()
    engine.usage = argparse.SUPPRESS
    engine.description = ENGINE_HELP
    print(engine.format_help(), end="")
    return EXIT_OK
