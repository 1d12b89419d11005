"""The client's ``initialize`` as the agent gets it (``liminal.kernel.version``): asking for the
version liminal speaks when the client asked for a later one, else as the client sent it."""

from __future__ import annotations

from typing import Any

import pytest

from liminal.kernel.version import SPOKEN, asked_for_spoken


def initialize(params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


@pytest.mark.parametrize("asked", [2, 3, 65535, 2.0, 1e308])
def test_a_later_version_is_asked_as_the_one_liminal_speaks(asked: float) -> None:
    params = {"protocolVersion": asked, "info": {"name": "c", "version": "1"}, "capabilities": {}}
    amended = asked_for_spoken("initialize", initialize(params), None)
    assert amended == initialize({**params, "protocolVersion": SPOKEN}) and SPOKEN == 1
    assert params["protocolVersion"] == asked  # the client's own message is left as it was


@pytest.mark.parametrize("params", [{"protocolVersion": 1}, {"protocolVersion": 0}, {"protocolVersion": True},
                                    {"protocolVersion": "2"}, {"protocolVersion": 1.0}, {}, None, [2]])
def test_anything_else_goes_as_sent(params: Any) -> None:
    assert asked_for_spoken("initialize", initialize(params), None) is None
