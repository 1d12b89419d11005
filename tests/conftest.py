from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# The harness rig's fixtures (fake model servers, real adapters): fixtures/harness/pytest_plugin.py
pytest_plugins = ["fixtures.harness.pytest_plugin"]
