from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Property tests must not fail on a loaded 2-core machine for want of time, and in CI they run
# the same examples every time (a flaky test blocks everyone's submissions).
settings.register_profile(
    "liminal",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("liminal")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# The harness rig's fixtures (fake model servers, real adapters): fixtures/harness/pytest_plugin.py
# and Chromium's for the dashboard's pages: tests/support/browser.py.
pytest_plugins = ["fixtures.harness.pytest_plugin", "tests.support.browser"]
