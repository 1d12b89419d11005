"""Fixtures for tests that drive the real adapters (see docs/testing.md).

- ``adapter``: each pinned adapter of the matrix in turn (``fixtures/harness/pins.toml``; not
  those pinned with ``matrix = false``, Gemini CLI: ``test_gemini.py`` drives it); skips with the
  reason when it is not installed (run ``scripts/install-harness``) or node is missing.
- ``rig``: a started ``Rig`` for that adapter in a fresh hermetic world; set
  ``rig.server.script`` to script the model. Fails the test if the fake model refused a request.
  (``make_rig``, ``fake_anthropic`` and ``fake_responses`` come from fixtures/harness/pytest_plugin.)

Every test in this folder is marked ``acceptance``: ``pytest -m "not acceptance"`` leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fixtures.harness import Adapter, Rig, Scenario, Shell, adapters
from fixtures.harness.pytest_plugin import require_adapter

ADAPTER_NAMES = sorted(n for n, a in adapters().items() if a.matrix)
CLAUDE_NAMES = sorted(n for n, a in adapters().items() if a.model_api == "anthropic")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.acceptance)


def require(adapter: Adapter) -> Adapter:
    require_adapter(adapter.name)  # skips saying why; under CI=true, fails
    return adapter


def adapter_fixture(names: list[str]) -> Callable[[pytest.FixtureRequest], Adapter]:
    """An ``adapter`` fixture over these adapters; a module assigns it to narrow its tests."""

    @pytest.fixture(params=names)
    def adapter(request: pytest.FixtureRequest) -> Adapter:
        return require(adapters()[request.param])

    return adapter


adapter = adapter_fixture(ADAPTER_NAMES)


@pytest.fixture
def rig(adapter: Adapter, make_rig: Callable[..., Rig]) -> Rig:
    return make_rig(adapter.name)


def flag_scenario(flag: Path) -> Scenario:
    """A model that, asked anything with WAIT in it, runs a tool that waits until ``flag``
    exists: a turn that stays under way until the test lets it end."""
    return Scenario().add(
        "WAIT", Shell(f"while [ ! -e {flag} ]; do sleep 0.05; done", "Wait for the flag"), "waited")
