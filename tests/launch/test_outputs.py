"""The files a live run writes (:mod:`stepview.launch.outputs`), without an engine.

Every mode opens and reports them through this one module, so what a user sees of them (a
default results file that vanishes when it holds nothing, a named one that is never removed,
one line per file that failed) is checked here once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stepview.cli_args import parse_own_args
from stepview.insight.run import RunInsight
from stepview.launch.outputs import RunOutputs, open_outputs
from stepview.model.snapshot import EngineState, StepSnapshot


def opened(args: list[str], *, default_results: bool) -> RunOutputs:
    options, _ = parse_own_args(args)
    outputs = open_outputs(options, dict, RunInsight(), default_results=default_results)
    assert isinstance(outputs, RunOutputs)
    return outputs


def close(outputs: RunOutputs) -> None:
    for sink in outputs.sinks:
        sink.close()


def test_the_default_results_file_is_made_in_the_data_directory_and_removed_when_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    outputs = opened([], default_results=True)
    path = outputs.results
    assert path is not None and path.is_relative_to(tmp_path / "data" / "stepview" / "results")
    assert path.exists() and len(outputs.sinks) == 1
    close(outputs)
    outputs.report_results(unfinished=0)
    assert not path.exists()
    assert capsys.readouterr().err == ""  # nothing to point at

    outputs = opened([], default_results=True)
    close(outputs)
    assert outputs.results is not None
    outputs.results.write_text('{"id": "0"}\n')
    outputs.report_results(unfinished=2)
    assert outputs.results.exists()
    assert capsys.readouterr().err == (
        f"stepview: finished requests saved in {outputs.results} "
        "(2 unfinished requests recorded there too)\n"
    )


def test_a_named_results_file_is_appended_to_and_never_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = tmp_path / "results.jsonl"
    named.write_text("")
    for default_results in (True, False):  # the TUI's choice does not touch a named file
        outputs = opened(["--results", str(named)], default_results=default_results)
        close(outputs)
        outputs.report_results(unfinished=0)
        outputs.discard()
        assert named.exists()
    named.write_text('{"id": "0"}\n')
    outputs = opened(["--results", str(named)], default_results=True)
    close(outputs)
    assert named.read_text() == '{"id": "0"}\n'
    outputs.report_results(unfinished=1)
    assert capsys.readouterr().err == (
        f"stepview: finished requests saved in {named} (1 unfinished request recorded there too)\n"
    )


def test_headless_writes_no_results_file_unless_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    outputs = opened([], default_results=False)
    assert outputs.results is None and outputs.sinks == []
    assert not (tmp_path / "data").exists()


def test_a_file_that_cannot_be_opened_stops_the_run_leaving_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line checked the paths; one that goes away before it is opened still
    ends in one line, exit 2, and the default results file made for the run is gone."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    options, _ = parse_own_args(["--record", str(tmp_path / "gone" / "t.jsonl")])
    assert open_outputs(options, dict, RunInsight(), default_results=True) == 2
    err = capsys.readouterr().err
    assert err.startswith("stepview: cannot open output file: ") and err.count("\n") == 1
    assert list((tmp_path / "data").rglob("*.jsonl")) == []


def test_finish_writes_the_exports_and_names_every_file_that_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "requests.csv"
    bad = tmp_path / "gone" / "run.json"
    outputs = opened(
        ["--export-csv", str(good), "--export-chrome-trace", str(bad)], default_results=False
    )
    snapshot = StepSnapshot(step=0, clock=0.0, engine_state=EngineState.IDLE)
    errors = outputs.finish(RunInsight(keep_steps=True), snapshot)
    assert good.read_text().startswith("id,state,")
    assert capsys.readouterr().err == f"stepview: 0 request(s) exported to {good}\n"
    assert len(errors) == 1 and errors[0].startswith(f"cannot write {bad}: ")
