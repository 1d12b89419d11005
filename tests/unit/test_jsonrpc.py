from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from liminal.acp import jsonrpc
from liminal.acp.events import Kind


def test_classify() -> None:
    assert jsonrpc.classify(jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"a"}')) is Kind.REQUEST
    assert jsonrpc.classify(jsonrpc.parse(b'{"jsonrpc":"2.0","method":"a"}')) is Kind.NOTIFICATION
    assert jsonrpc.classify(jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"result":null}')) is Kind.RESPONSE
    assert jsonrpc.classify(jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"error":{}}')) is Kind.RESPONSE
    assert jsonrpc.classify(jsonrpc.parse(b"[1,2]")) is Kind.INVALID
    assert jsonrpc.classify(jsonrpc.parse(b"nope")) is Kind.INVALID
    assert jsonrpc.classify(jsonrpc.parse(b'{"method":5}')) is Kind.INVALID


def test_parse_falls_back_for_what_orjson_refuses() -> None:
    assert jsonrpc.parse(b'{"x": NaN}') is not None


def test_big_integer_ids_are_echoed_exactly() -> None:
    raw = b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"m"}'
    message = jsonrpc.parse(raw)
    assert message is not None
    assert jsonrpc.encode_id(message["id"], raw) == b"123456789012345678901234567890"


def test_recover_top_level_ignores_nested_ids() -> None:
    head = b'{"jsonrpc":"2.0","params":{"id":99,"x":[{"id":3}]},"method":"session/prompt","id":"r-1","p'
    found = jsonrpc.recover_top_level(head)
    assert found["id"] == b'"r-1"'
    assert found["method"] == b'"session/prompt"'


def test_recover_top_level_finds_a_trailing_id_in_the_tail() -> None:
    found = jsonrpc.recover_top_level(b'{"jsonrpc":"2.0","result":{"content":"aaaa', b'aaaa"},"id":42}')
    assert found["id"] == b"42"
    assert "method" not in found


def test_recover_handles_escaped_quotes() -> None:
    found = jsonrpc.recover_top_level(b'{"params":"a\\"b,\\"id\\":5","id":6,"method":"m"}')
    assert found["id"] == b"6"


@given(st.binary(max_size=500), st.binary(max_size=100))
def test_recover_never_crashes(head: bytes, tail: bytes) -> None:
    jsonrpc.recover_top_level(head, tail)


def test_error_frame() -> None:
    assert jsonrpc.error_frame(b"7", -32600, "too big") == (
        b'{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"too big"}}'
    )
