"""``stepview --rerun TRACE [vLLM flags]``: a recorded workload sent again, then compared.

The loop from incident to fix: the trace (or flight recording) of last night's run holds its
requests; :func:`~stepview.trace.workload.workload_of` rebuilds them (prompts, sampling
parameters and seeds, arrival offsets, recorded lengths), and this mode sends them, as they
arrived (``--rerun-speed`` times faster), to an engine started with the flags given, as a
headless run (:mod:`stepview.launch.headless`) that records its own trace. Then the two
recordings are compared as ``--replay TRACE --compare RERUN`` would
(:mod:`stepview.launch.compare`): in the compare view, which opens at their first scheduling
difference; with ``--summary``, the compare table on stdout; with ``--headless``, after the
requests it printed like any headless run, the first difference on stderr.

What the rerun could not send as recorded is said where the user looks, before the engine
starts: each request whose prompt cannot be rebuilt, by id and why (it is skipped, never
dropped unnamed), and how many were held to their recorded length; each record the rerun
writes (``--json``, ``--results``) says whether its length was forced (``"rerun"``), and so does
its trace's header. Without ``--model`` the rerun runs the trace's model (a different model
would not be a rerun). Nothing here reads a trace before the flags were judged, and a trace
that cannot be read is one line, exit 2, before vLLM is imported.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from stepview.launch.compare import run_compare
from stepview.launch.exits import EXIT_FAILED, EXIT_OK, fail, notice
from stepview.launch.headless import Feed, run_headless
from stepview.launch.terminal import claim_terminal
from stepview.model.commands import Schedule
from stepview.outputs.run_files import RECORD, RecordSpec
from stepview.run.spec import RunSpec
from stepview.trace.format import TraceError
from stepview.trace.reader import load_trace
from stepview.trace.store import Trace
from stepview.trace.workload import Workload, workload_of

_SHOWN_IDS = 10


def default_rerun_path() -> Path:
    """Where a rerun's trace goes without ``--record``: a new file per rerun in stepview's
    data directory (the compare needs it; it is kept to be looked at again)."""
    from platformdirs import user_data_dir

    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(user_data_dir("stepview")) / "reruns" / f"rerun-{stamp}-{os.getpid()}.trace.jsonl"


def read_workload(path: Path) -> tuple[Trace, Workload] | str:
    """The trace at ``path`` and its workload, or the one line saying why there is none."""
    try:
        trace = load_trace(path)
    except TraceError as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot read trace {path}: {exc.strerror or exc}"
    workload = workload_of(trace)
    if not workload.requests:
        skipped = (
            f" ({len(workload.skipped)} whose prompt cannot be rebuilt)" if workload.skipped else ""
        )
        return f"{path}: no request to rerun{skipped}"
    return trace, workload


def _ids(ids: list[str]) -> str:
    more = f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else ""
    return " ".join(ids[:_SHOWN_IDS]) + more


def say_workload(path: Path, trace: Trace, workload: Workload, speed: float) -> None:
    """Name on stderr what the rerun sends, what it holds to length and what it skips."""
    if trace.warning:
        notice(f"{path}: {trace.warning}")
    for skipped in workload.skipped:
        notice(f"{skipped.request_id} is not rerun: {skipped.why}")
    faster = f" ({speed:g}x faster)" if speed != 1.0 else ""
    notice(
        f"rerunning {len(workload.requests)} request(s) of {path}, arriving over "
        f"{workload.span / speed:.1f} s{faster}"
    )
    forced = workload.forced
    if forced:
        notice(
            f"{len(forced)} held to their recorded output length (ignore_eos, max_tokens): "
            f"{_ids(forced)}"
        )


def feed_of(path: Path, workload: Workload, speed: float, *, quiet: bool) -> Feed:
    """The headless run's requests, and what its records and trace header say of the rerun."""
    by_id = {item.request_id: item for item in workload.requests}

    def annotate(request_id: str) -> dict[str, Any]:
        item = by_id.get(request_id)
        if item is None:
            return {}
        return {
            "rerun": {"forced": item.forced, "recorded_output_tokens": list(item.output_tokens)}
        }

    header = {
        "rerun": {
            "of": str(path),
            "speed": speed,
            "forced": workload.forced,
            "skipped": [[s.request_id, s.why] for s in workload.skipped],
        }
    }
    requests = [Schedule(workload.arrivals(speed))]
    return Feed(requests=list(requests), annotate=annotate, header=header, quiet=quiet)


def with_trace_model(engine_argv: list[str], trace: Trace) -> list[str]:
    """``engine_argv``, with the trace's model added when no ``--model`` is given: stepview's
    built-in models by their names, any other by what vLLM was given (its path or hub name)."""
    if any(arg.partition("=")[0] == "--model" for arg in engine_argv):
        return engine_argv
    from stepview.engine.own.builtin_models import alias_of

    header = trace.header
    engine_args = header.get("engine_args") or {}
    model = alias_of(str(header.get("model") or "")) if header.get("demo_model") else None
    model = model or engine_args.get("model")
    if trace.info.attached or not model:
        # A watched server's served name is nothing vLLM can be sure to load: the user says.
        notice(
            f"the trace does not say which model to load (it ran {trace.info.model or '?'}); "
            "the rerun runs stepview's default unless --model names it"
        )
        return engine_argv
    notice(f"the rerun runs the trace's model, {model} (--model to choose another)")
    return ["--model", str(model), *engine_argv]


def run_rerun(spec: RunSpec, log_path: Path) -> int:
    """Rerun the workload of ``spec.rerun`` and compare; see the module docstring."""
    assert spec.rerun is not None
    path = spec.rerun.path
    asked = RECORD.of(spec.outputs)
    record = default_rerun_path() if asked is None else asked.path
    if record.exists() and _same_file(record, path):
        return fail(f"--record {record} is the trace given to --rerun: record the rerun elsewhere")
    read = read_workload(path)
    if isinstance(read, str):
        return fail(read)
    trace, workload = read
    compare_tui = not spec.front.headless and not spec.front.summary
    if compare_tui:  # judged before the engine runs, not found out once the rerun is over
        problem = claim_terminal("; use --summary or --headless to rerun without the compare view")
        if problem is not None:
            return fail(problem)
    speed = spec.rerun.speed
    engine_argv = with_trace_model(list(spec.engine.argv), trace)
    say_workload(path, trace, workload, speed)
    if asked is None:
        record.parent.mkdir(parents=True, exist_ok=True)
        notice(f"recording the rerun in {record}")
    admit = spec.limits.admit_per_step
    run = replace(
        spec,
        outputs=replace(
            spec.outputs, chosen={**spec.outputs.chosen, RECORD.name: asked or RecordSpec(record)}
        ),
        limits=replace(spec.limits, admit_per_step=0 if admit is None else admit),
        engine=replace(spec.engine, argv=tuple(engine_argv)),
    )
    feed = feed_of(path, workload, speed, quiet=spec.front.summary or compare_tui)
    before = _stamp(record)
    code = run_headless(run, log_path, feed)
    if code >= 128 or _stamp(record) == before:
        # Stopped by a signal or a closed pipe (no compare, as the user asked), or stopped
        # before anything was recorded (the reason is said): a file of before is no rerun.
        return code
    if spec.front.headless and not spec.front.summary:
        return _say_difference(path, record, code)
    compared = run_compare(path, record, summary=spec.front.summary, aligned=True)
    if spec.front.summary and compared == EXIT_OK:
        _print_notes(workload)
    return code if code != EXIT_OK else compared


def _stamp(path: Path) -> tuple[int, int] | None:
    """When ``path`` was last written and its size (``None``: there is no such file)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _print_notes(workload: Workload) -> None:
    """Under the compare table: which requests the rerun held to length, which it skipped."""
    lines = []
    forced = workload.forced
    if forced:
        lines.append(f"rerun: {len(forced)} held to their recorded output length: {_ids(forced)}")
    lines.extend(f"rerun: {s.request_id} skipped: {s.why}" for s in workload.skipped)
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _say_difference(original: Path, rerun: Path, code: int) -> int:
    """A headless rerun's last lines on stderr: where the runs first differ, how to look."""
    from stepview.insight.compare import compare_runs
    from stepview.insight.compare_report import difference_line
    from stepview.launch.compare import load_pair

    pair = load_pair(original, rerun)
    if isinstance(pair, str):
        return fail(pair, EXIT_FAILED)
    a, b = pair
    comparison = compare_runs(a.snapshots, b.snapshots, aligned=True)
    notice(difference_line(comparison.divergence, comparison.b_names, comparison.b_shift))
    notice(f"to look: stepview --replay {original} --compare {rerun}")
    return code
