from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.served import Servers


@pytest.fixture
def servers() -> Iterator[Servers]:
    """``liminal serve`` processes and their clients, stopped however the test ended."""
    started = Servers()
    try:
        yield started
    finally:
        started.close()
