"""A fleet found where Prometheus already lists it (``--attach prometheus://HOST:PORT``).

Prometheus knows every server it scrapes: its HTTP API's ``GET /api/v1/targets?state=active``
answers each active target's ``scrapeUrl`` (the server's ``/metrics``), its ``labels``
(``job``, ``instance`` and what its service discovery added) and ``health``. Each target whose
scrape URL ends in ``/metrics`` is watched as ``--attach SCHEME://HOST:PORT[PREFIX]`` would
watch it (its own ``/metrics`` read by stepview, every ``--scrape-interval``: Prometheus'
figures are a scrape interval old and lack what stepview works out from the page, so it is
asked only *which* servers there are, every :data:`PROMETHEUS_LOOK_S`).

Which targets: with ``?job=NAME`` (repeatable), that job's every target, up or down — what
the user named is watched, a down one shows ``down``. Without a job, every target that
Prometheus has scraped vLLM's series from in the last :data:`LOOKBACK_S` (its ``/api/v1/series``
for ``vllm:num_requests_running``, matched on ``job`` and ``instance``), so that a Prometheus
that also scrapes node exporters and itself gives its vLLM servers only; a server that never
answered, or has been down longer than that, is not among them until it answers again.

Nothing here decides what a fleet does with the list:
:mod:`stepview.engine.watch.fleet.fleet_members` follows it. An answer that is not
Prometheus' (a vLLM server's port given by mistake) or no answer at all raises
:class:`PrometheusError` with a line that says so.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from stepview.engine.watch.api.server_api import ApiError, ServerApi
from stepview.model.address import MetricsUrl
from stepview.model.targets import Discovery, ListingError, Target, labels_of

log = logging.getLogger(__name__)

PROMETHEUS_LOOK_S = 5.0
"""How often Prometheus is asked for its targets: it applies a change of its own service
discovery within about 5 s (its scrape manager's update interval), so asking more often would
find nothing sooner."""
VLLM_SERIES = "vllm:num_requests_running"
"""A series every vLLM server exports (0.6 to today): a target that has it is a vLLM server."""
LOOKBACK_S = 3600.0
"""How far back (without ``?job=``) a target's vLLM series make it one of the fleet."""
TARGETS = "/api/v1/targets?state=active"
METRICS = "/metrics"


class PrometheusError(ListingError):
    """Prometheus could not be asked, or did not answer as Prometheus; one line, its name
    first."""


class PrometheusFinder:
    """The vLLM servers a Prometheus server scrapes: :meth:`poll` asks it."""

    def __init__(
        self,
        discovery: Discovery,
        interval: float = PROMETHEUS_LOOK_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = discovery.name
        self.jobs = discovery.jobs
        self.interval = interval
        self._clock = clock
        self._api = ServerApi(discovery.location)
        self._skipped: set[str] = set()  # scrape URLs told of (once) as not /metrics

    def poll(self) -> tuple[Target, ...]:
        """Every target of the fleet now (see the module's docstring for which)."""
        answer = self._get(TARGETS)
        instances = None
        if not self.jobs:
            query = {"match[]": VLLM_SERIES, "start": f"{self._clock() - LOOKBACK_S:.3f}"}
            instances = vllm_instances(self._get(f"/api/v1/series?{urllib.parse.urlencode(query)}"))
        targets, skipped = active_targets(answer, self.jobs, instances, self.name)
        for url in sorted(set(skipped) - self._skipped):
            log.warning("%s: target %s left out: its scrape path is not …/metrics", self.name, url)
        self._skipped.update(skipped)
        return targets

    def _get(self, path: str) -> Any:
        try:
            return self._api.get(path)
        except ApiError as exc:
            endpoint = path.partition("?")[0]
            if exc.status is not None or exc.__cause__ is None:
                raise PrometheusError(
                    f"{self.name}: {endpoint} answered {exc} (is this Prometheus' address?)"
                ) from None
            raise PrometheusError(f"{self.name}: cannot reach it ({_why(exc.__cause__)})") from None


def active_targets(
    answer: Any, jobs: tuple[str, ...], instances: set[tuple[str, str]] | None, listed_by: str
) -> tuple[tuple[Target, ...], list[str]]:
    """The targets of a ``/api/v1/targets`` answer that are the fleet's (``jobs``: theirs
    only; ``instances``: the ``(job, instance)`` pairs with vLLM's series, ``None``: any), in
    Prometheus' order without repeats; and the scrape URLs left out for not being a
    ``/metrics``."""
    data = answer.get("data") if isinstance(answer, dict) else None
    listed = data.get("activeTargets") if isinstance(data, dict) else None
    if not isinstance(listed, list) or answer.get("status") != "success":
        raise PrometheusError(
            f"{listed_by}: {TARGETS.partition('?')[0]} did not answer as Prometheus does "
            '({"status": "success", "data": {"activeTargets": [...]}})'
        )
    found: dict[str, Target] = {}
    skipped: list[str] = []
    for entry in listed:
        labels = entry.get("labels") if isinstance(entry, dict) else None
        if not isinstance(labels, dict):
            continue
        labels = {str(k): str(v) for k, v in labels.items()}
        job, instance = labels.get("job", ""), labels.get("instance", "")
        if jobs and job not in jobs:
            continue
        if instances is not None and (job, instance) not in instances:
            continue
        url = str(entry.get("scrapeUrl") or "")
        address = watched_address(url)
        if address is None:
            skipped.append(url)
            continue
        found.setdefault(address, Target(MetricsUrl(address), labels_of(labels), listed_by))
    return tuple(found.values()), skipped


def vllm_instances(answer: Any) -> set[tuple[str, str]]:
    """The ``(job, instance)`` pairs of a ``/api/v1/series`` answer's series."""
    series = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(series, list):
        raise PrometheusError("/api/v1/series did not answer as Prometheus does")
    return {
        (str(s.get("job", "")), str(s.get("instance", ""))) for s in series if isinstance(s, dict)
    }


def watched_address(scrape_url: str) -> str | None:
    """``SCHEME://HOST:PORT[PREFIX]`` of a scrape URL ``…[PREFIX]/metrics[?params]``; ``None``
    when its path is not a ``/metrics`` (not vLLM's page: nothing stepview can watch)."""
    parts = urllib.parse.urlsplit(scrape_url)
    path = parts.path.rstrip("/")
    if parts.scheme not in ("http", "https") or not parts.netloc or not path.endswith(METRICS):
        return None
    return f"{parts.scheme}://{parts.netloc}{path[: -len(METRICS)]}"


def _why(cause: BaseException) -> str:
    """An OS error in the words people know ("connection refused", "timed out")."""
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return str(cause) or type(cause).__name__
