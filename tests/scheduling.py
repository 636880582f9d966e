"""How the suite shares two cores (``pytest -n 3``, used by ``tests/conftest.py``).

The unit of work a worker takes is a test module, as with xdist's ``--dist loadfile``: the
engine pool of a worker (``tests/vllm_engines.py``) then builds an engine once for a module's
tests, which share their settings, instead of once per test as tests alternate between
workers. Two kinds of test are grouped across modules instead (``xdist_group`` marks, set at
collection):

- ``servers``: every test of a shared API server (``tests/servers.py``): one worker, so the
  servers start once per run, in that worker;
- ``heavy``: the tests that run stepview with real vLLM in tmux or in an engine-core process of
  its own (marked ``e2e``, or ``heavy`` by hand): each keeps two or three processes busy and
  reads a screen, so two of them at once would starve each other on two cores; one after
  another on one worker, beside lighter tests on the other.

The other modules that run real vLLM (marked ``engine``) are units named ``engine:MODULE``.

Lanes: the first :data:`ENGINE_LANES` workers run every unit that runs vLLM (two on two
cores: never three engines busy at once), then whatever is left; any further worker is a light
lane that takes only the units without vLLM. Those (the quick loop's tests: pilot-driven
screens, fake servers, fakes of the engine) spend about half their time waiting (Textual's
pilot waits for the app to go idle after every key; measured: 131 s of CPU in 291 s), so a
third worker runs them in the gaps the engines leave instead of taking turns with them. The
quick loop, without vLLM, runs six workers (two cores), every one of them light work.

Units are handed out longest first (longest-processing-time scheduling: the fewest minutes
with one worker idle at the end): the groups, then modules that run real vLLM, then the rest;
within each, the units :data:`UNIT_SECONDS` knows to be long first, then the others in
collection order.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

SERVERS, HEAVY = "servers", "heavy"
ENGINE = "engine:"
"""The prefix of a unit of its own for a module's tests that run real vLLM."""
ENGINE_LANES = 2
"""Workers that run vLLM (see the module docstring): one per core."""
HEAVY_TIMEOUT_S = 900
"""pytest-timeout's limit for a heavy test or one of the shared servers (300 s for the others):
room for its waits that include an engine's start-up on a loaded machine
(``tests.e2e.terminal.STARTUP_S``), or the three shared servers' start."""
_UNIT_ORDER = {SERVERS: 0, HEAVY: 1}
UNIT_SECONDS: dict[str, float] = {
    # Modules that run real vLLM (both engine lanes busy, beside the servers' tests).
    ENGINE + "tests/bench/test_bench_smoke.py": 139,
    ENGINE + "tests/conformance/test_scheduler_conformance.py": 120,
    ENGINE + "tests/otlp/test_otlp_real.py": 68,
    ENGINE + "tests/events/test_own_engine_real.py": 64,
    ENGINE + "tests/engine/own/test_multiprocess.py": 63,
    ENGINE + "tests/reliability/test_stuck_engine.py": 62,
    ENGINE + "tests/launch/test_rerun_real.py": 62,
    ENGINE + "tests/reliability/test_signals_between.py": 61,
    ENGINE + "tests/reliability/test_core_stacks_real.py": 52,
    ENGINE + "tests/launch/test_check.py": 51,
    ENGINE + "tests/launch/test_metrics_real.py": 48,
    ENGINE + "tests/launch/test_load_headless.py": 46,
    ENGINE + "tests/reliability/test_cli_errors.py": 43,
    ENGINE + "tests/launch/test_headless.py": 42,
    ENGINE + "tests/engine/own/test_core_hold.py": 40,
    ENGINE + "tests/metrics/test_prometheus_real.py": 39,
    # The rest (the quick loop's, four at a time).
    "tests/reliability/test_form_input.py": 90,
    "tests/ui/test_snapshots.py": 45,
    "tests/ui/test_app.py": 42,
    "tests/reliability/test_outside_text.py": 27,
    "tests/ui/fleet/test_fleet_sort_filter.py": 25,
    "tests/bench/test_bench_smoke.py": 24,
    "tests/test_layers.py": 20,
}
"""Seconds the longest units took (the engine ones two at a time, the others four at a time,
on a loaded 2-core machine): only their order matters, so that a long unit never starts last.
A unit not named here goes after these, in collection order; re-measure with
``--durations=0`` when a unit grows past the last named one of its kind."""


def group_of(item: pytest.Item, fixtures: set[str], server_fixtures: set[str]) -> str | None:
    """The cross-module group ``item`` belongs to, if any."""
    if fixtures & server_fixtures:
        return SERVERS
    if item.get_closest_marker("e2e") is not None or item.get_closest_marker("heavy"):
        return HEAVY
    if item.get_closest_marker("engine") is not None:
        return ENGINE + item.nodeid.split("::", 1)[0]
    return None


def whole_module_marked(path: Path, mark: str) -> bool:
    """Whether the test module at ``path`` marks all its tests ``mark`` at its top
    (``pytestmark = pytest.mark.MARK``, alone or in a list), read without importing it."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError):
        return False  # let pytest's own collection say what is wrong with it
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            values = node.value.elts if isinstance(node.value, ast.List) else [node.value]
            return any(isinstance(value, ast.Attribute) and value.attr == mark for value in values)
    return False


def unit_rank(item: pytest.Item) -> int:
    """Where ``item``'s unit goes in the queue: groups first, then real vLLM, then the rest."""
    for mark in item.iter_markers("xdist_group"):
        return _UNIT_ORDER.get(str(mark.args[0]), 2)
    return 3


def order_units(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place so that each unit starts where its rank says, the long ones of
    a rank first (:data:`UNIT_SECONDS`; stable: a module's tests keep their order, and the
    other units of a rank keep collection order)."""
    first_rank: dict[str, int] = {}
    for item in items:
        unit = _unit(item)
        first_rank[unit] = min(first_rank.get(unit, 9), unit_rank(item))
    items.sort(key=lambda item: (first_rank[_unit(item)], -UNIT_SECONDS.get(_unit(item), 0)))


def _unit(item: pytest.Item) -> str:
    for mark in item.iter_markers("xdist_group"):
        return str(mark.args[0])
    return item.nodeid.split("::", 1)[0]


def runs_vllm(unit: str) -> bool:
    """Whether the unit named ``unit`` (a group or a module's path) runs real vLLM."""
    return unit in (SERVERS, HEAVY) or unit.startswith(ENGINE)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Modules as units of work, except the groups; vLLM on the engine lanes only (see the
    module docstring)."""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.rsplit("@", 1)[-1]  # xdist's loadgroup suffix: a group
            return nodeid.split("::", 1)[0]

        def _assign_work_unit(self, node: Any) -> None:
            """Hand ``node`` the first unit its lane takes, or shut it down when none is
            left for it (a light lane once only vLLM's units remain)."""
            light_lane = self.nodes.index(node) >= ENGINE_LANES
            units = [unit for unit in self.workqueue if not (light_lane and runs_vllm(unit))]
            if not units:
                node.shutdown()
                return
            if not light_lane:  # vLLM's units first, while there are any
                units.sort(key=lambda unit: not runs_vllm(unit))
            work_unit = self.workqueue.pop(units[0])
            self.assigned_work.setdefault(node, {})[units[0]] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some(
                [collection.index(nodeid) for nodeid, done in work_unit.items() if not done]
            )

    return Lanes(config, log)
