"""The files a live run writes (:mod:`stepview.launch.outputs`), without an engine.

Every mode opens and reports them through this one module, so what a user sees of them (a
default results file that vanishes when it holds nothing, a named one that is never removed,
one line per file that failed) is checked here once.
"""

from __future__ import annotations

from csv import DictReader
from pathlib import Path

import pytest

from stepview.cli.args import parse_own_args
from stepview.cli.specs import run_spec
from stepview.engine.driver.loop import Driver
from stepview.insight.run import RunInsight
from stepview.launch.outputs import RunOutputs, open_outputs
from stepview.model.commands import AddRequest
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.testing.fake_engine import FakeEngine
from tests.helpers import all_done, wait_for


def opened(args: list[str], *, default_results: bool) -> RunOutputs:
    options, _ = parse_own_args(args)
    outputs = open_outputs(
        run_spec(options, []), dict, RunInsight(), default_results=default_results
    )
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
    assert open_outputs(run_spec(options, []), dict, RunInsight(), default_results=True) == 2
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


def finish_requests(outputs: RunOutputs, count: int, keep_finished: int) -> StepSnapshot:
    """Run ``count`` requests on the fake engine with ``outputs``' files, keeping only
    ``keep_finished`` of them in memory; the last snapshot."""
    engine = FakeEngine(max_num_seqs=4)
    driver = Driver(lambda phase: engine, sinks=tuple(outputs.sinks), keep_finished=keep_finished)
    driver.start()
    try:
        for i in range(count):
            driver.send(AddRequest(f"r{i}", "hello", SamplingSpec(max_tokens=3)))
        last = wait_for(driver, lambda s: s.finished.total == count and all_done(s), timeout=60)
    finally:
        driver.stop()
    close(outputs)
    return last


def test_a_run_longer_than_memory_keeps_exports_every_request_from_its_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, csv = tmp_path / "results.jsonl", tmp_path / "requests.csv"
    results.write_text('{"id": "from an earlier run", "timings": {}}\n')  # appended after
    outputs = opened(["--results", str(results), "--export-csv", str(csv)], default_results=False)
    last = finish_requests(outputs, 40, keep_finished=5)
    assert last.finished.older > 0 and len(last.finished) < 40  # memory let the oldest go
    capsys.readouterr()
    assert outputs.finish(RunInsight(), last) == []
    rows = list(DictReader(csv.open()))
    assert sorted(row["id"] for row in rows) == sorted(f"r{i}" for i in range(40))
    assert {row["state"] for row in rows} == {"finished"}
    assert capsys.readouterr().err == f"stepview: 40 request(s) exported to {csv}\n"


def test_without_a_results_file_the_export_says_how_many_it_no_longer_had(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "requests.csv"
    outputs = opened(["--export-csv", str(csv)], default_results=False)
    last = finish_requests(outputs, 40, keep_finished=5)
    kept, older = len(last.finished), last.finished.older
    capsys.readouterr()
    assert outputs.finish(RunInsight(), last) == []
    assert len(list(DictReader(csv.open()))) == kept
    assert capsys.readouterr().err == (
        f"stepview: {kept} request(s) exported to {csv}\n"
        f"stepview: the {older} oldest finished requests were no longer in memory"
        " (--results keeps all)\n"
    )


@pytest.mark.parametrize("value", ["0", "-3"])
def test_keep_finished_must_be_one_or_more(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_own_args(["--keep-finished", value])
    assert stopped.value.code == 2
    assert f"argument --keep-finished: must be 1 or more, got {value}" in capsys.readouterr().err
