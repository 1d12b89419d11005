from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from fixtures.harness.adapters import SUMMARIES_OFF
from tests.support import ast_guard

# Before anything parses: a failed test's report must not fail in the making (tests/support/ast_guard.py).
ast_guard.install()

# Property tests must not fail on a loaded 2-core machine for want of time, and in CI they run
# the same examples every time (a flaky test blocks everyone's submissions).
settings.register_profile(
    "liminal",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("liminal")

# The model's summaries off in every liminal a test starts with this environment
# (``tests/support/proxy_process.child_env``, ``liminal serve`` and the dashboard's, the CLI run
# in-process) and in the settings loaded from it, unless the test asks for them: a side session
# would take the scripted agent's or the fake model's replies (fixtures/harness/adapters.py,
# ``SUMMARIES_OFF``; the rig's own environment has it already). Here, at import, before any test
# module reads the environment.
os.environ.update(SUMMARIES_OFF)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_terminal_size_from_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist's workers get ``COLUMNS`` and ``LINES`` from the runner's terminal, and
    rich sizes what the commands print by them: a table piped in a test wrapped at 80 columns
    under ``-n`` and at 100 without. A test sees what a pipe sees: no size."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


# The harness rig's fixtures (fake model servers, real adapters): fixtures/harness/pytest_plugin.py
# and Chromium's for the dashboard's pages: tests/support/browser.py.
pytest_plugins = ["fixtures.harness.pytest_plugin", "tests.support.browser"]


@pytest.fixture(autouse=True)
def _acp_schema_checked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """With ``LIMINAL_TEST_ACP_SCHEMA=1``, every frame liminal wrote in the test, to each client
    the test drove (``LineClient``) and to the scripted agent (``$AGENT_LOG_IN`` in the test's
    ``tmp_path``), is checked against ACP's schema when the test ends
    (``fixtures.harness.acp_schema``). Opt-in: tests that send malformed input on purpose get
    answers to requests the schema does not know."""
    if os.environ.get("LIMINAL_TEST_ACP_SCHEMA", "") not in ("1", "true"):
        yield
        return
    from fixtures.harness import acp_schema
    from tests.support.proxy_process import LineClient

    clients: list[LineClient] = []
    made = LineClient.__init__

    def recorded(self: LineClient) -> None:
        made(self)
        clients.append(self)

    monkeypatch.setattr(LineClient, "__init__", recorded)
    yield
    tmp = request.node.funcargs.get("tmp_path")
    logged = isinstance(tmp, Path) and (tmp / "agent_in.bin").is_file()
    agent_sent = ((tmp / "agent_out.bin").read_bytes().splitlines()
                  if logged and (tmp / "agent_out.bin").is_file() else [])
    sides: list[acp_schema.Side] = [(c.sent, c.lines, agent_sent) for c in clients]
    if logged:
        sides.append((agent_sent, (tmp / "agent_in.bin").read_bytes().splitlines(),
                      [line for c in clients for line in c.sent]))
    acp_schema.assert_conforms(sides)
