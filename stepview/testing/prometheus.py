"""A real Prometheus server for the tests and benchmarks: started on a free port, queried
through its HTTP API, stopped whole.

The rules, the dashboard and the fleet discovery stepview ships are only worth what a real
Prometheus makes of them: its scraper parses stepview's exporter, its engine evaluates the
dashboard's queries (``rate`` over a counter reset, say), and its ``/api/v1/targets`` is what
``--attach prometheus://`` reads. Debian's ``prometheus`` package (2.42) is what
``scripts/setup.sh`` installs for the suite; :func:`prometheus_binary` says so when it is
missing, so a test that needs it fails with the reason instead of being skipped.

Scrapes every second (the shortest interval Prometheus takes in its configuration), so that
a test waits seconds, not the default minute, for the first samples.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from stepview.testing.vllm_server import free_port

START_TIMEOUT_S = 60.0
"""How long Prometheus may take to answer ``/-/ready`` (about a second on a quiet machine)."""
SCRAPE_INTERVAL = "1s"

Result = list[dict[str, Any]]
"""One ``/api/v1/query`` answer's ``data.result``: ``{"metric": labels, "value"|"values": …}``."""


class PrometheusMissing(RuntimeError):
    """No ``prometheus`` binary: the suite's set-up installs it (Debian's package)."""


def prometheus_binary() -> str:
    """The path of the ``prometheus`` binary, or :class:`PrometheusMissing` saying how to get
    it."""
    found = shutil.which("prometheus")
    if found is None:
        raise PrometheusMissing(
            "Prometheus is not installed: `scripts/setup.sh test` installs Debian's "
            "`prometheus` package (apt-get install prometheus), which the tests of the rules, "
            "the dashboard and the discovery run against"
        )
    return found


def config_text(
    jobs: Mapping[str, Sequence[str]],
    *,
    file_sd: Mapping[str, Path] | None = None,
    rule_files: Sequence[Path] = (),
) -> str:
    """A ``prometheus.yml``: each job of ``jobs`` scrapes its static targets (``host:port``);
    each of ``file_sd`` reads its targets from a file (re-read at once on a change, and every
    second)."""
    scrape: list[dict[str, Any]] = [
        {"job_name": job, "static_configs": [{"targets": list(targets)}]}
        for job, targets in jobs.items()
    ]
    scrape += [
        {"job_name": job, "file_sd_configs": [{"files": [str(path)], "refresh_interval": "1s"}]}
        for job, path in (file_sd or {}).items()
    ]
    config = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": scrape,
    }
    return json.dumps(config, indent=2)  # JSON is YAML: no YAML writer needed


class Prometheus:
    """A Prometheus server of its own, in ``folder`` (its configuration and its data)."""

    def __init__(
        self,
        folder: Path,
        jobs: Mapping[str, Sequence[str]] | None = None,
        *,
        file_sd: Mapping[str, Path] | None = None,
        rule_files: Sequence[Path] = (),
        scrape_itself: bool = False,
    ) -> None:
        """``scrape_itself``: a job ``prometheus`` scraping this server's own ``/metrics``,
        as Prometheus' example configuration has (a target that is not vLLM's)."""
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = folder / "prometheus.yml"
        jobs = dict(jobs or {})
        if scrape_itself:
            jobs["prometheus"] = [f"127.0.0.1:{self.port}"]
        self.config.write_text(
            config_text(jobs, file_sd=file_sd, rule_files=rule_files), encoding="utf-8"
        )
        self.log = folder / "prometheus.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Prometheus:
        """Start it and wait until it is ready; ``RuntimeError`` with its log if it is not."""
        command = [
            prometheus_binary(),
            f"--config.file={self.config}",
            f"--storage.tsdb.path={self.folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",  # POST /-/reload re-reads the configuration
        ]
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"Prometheus exited at start-up: {self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"Prometheus not ready in {START_TIMEOUT_S:.0f} s: {self._log_tail()}")

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s) and reap it."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/PATH?params``'s ``data``; ``RuntimeError`` with Prometheus' own error."""
        query = urllib.parse.urlencode(params)
        url = f"{self.url}/api/v1/{path}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:  # a bad query: Prometheus says why in the body
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus {path} {params}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr: str) -> Result:
        """An instant query's result (a vector, or a matrix for a range selector)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def wait_for(
        self, expr: str, condition: Callable[[Result], bool], timeout: float = 60.0
    ) -> Result:
        """Query ``expr`` until ``condition`` holds of its result; ``TimeoutError`` with the
        last result and the scrape targets' health otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if condition(result):
                return result
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{expr!r} after {timeout:.0f} s: {result}; targets: {self.target_health()}"
                )
            time.sleep(0.25)

    def target_health(self) -> list[tuple[str, str, str]]:
        """Each active target's (scrape URL, health, last error): what a failed wait shows."""
        active = self.api("targets", state="active")["activeTargets"]
        return [(t["scrapeUrl"], t["health"], t.get("lastError", "")) for t in active]

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-2000:]
        except OSError:
            return "(no log)"
