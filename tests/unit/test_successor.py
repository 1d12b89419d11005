"""liminal as a proxy component: the framing of its one stdio (``liminal.acp.successor``) and
the two ends the proxy runs over (``liminal.transport.chain``), against literal frames in the
shapes the conductor sends (docs/facts.md, "The conductor and proxy chains")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from liminal import config
from liminal.acp.port import OwnRequestError
from liminal.acp.successor import ENVELOPE_ID_PREFIX, End, SuccessorFraming
from liminal.proxy import Proxy
from liminal.transport.chain import ChainStdio


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def parsed(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(x) for x in data.splitlines()]


@pytest.mark.parametrize("prefix", ["proxy/", "_proxy/"])
def test_proxy_initialize_is_the_clients_initialize_and_liminal_answers_in_its_spelling(prefix: str) -> None:
    framing = SuccessorFraming()
    params = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}
    end, out = framing.read(line({"jsonrpc": "2.0", "id": "c-1", "method": prefix + "initialize", "params": params}))
    assert end is End.CLIENT
    assert json.loads(out) == {"jsonrpc": "2.0", "id": "c-1", "method": "initialize", "params": params}
    # The router sends it on to the agent: it goes to the successor, wrapped, in that spelling.
    [wrapped] = parsed(framing.wrap(out))
    assert wrapped["method"] == prefix + "successor"
    assert wrapped["params"] == {"method": "initialize", "params": params}
    assert wrapped["id"].startswith(ENVELOPE_ID_PREFIX)
    # The successor's answer to the envelope is the agent's answer to the client's id.
    end, back = framing.read(line({"jsonrpc": "2.0", "id": wrapped["id"], "result": {"protocolVersion": 1}}))
    assert (end, json.loads(back)) == (End.AGENT, {"jsonrpc": "2.0", "id": "c-1", "result": {"protocolVersion": 1}})
    assert framing.unanswered() == 0


def test_the_successors_messages_are_unwrapped_and_its_requests_answered_under_the_envelopes_id() -> None:
    framing = SuccessorFraming()
    update = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}}
    end, out = framing.read(line({"jsonrpc": "2.0", "method": "proxy/successor",
                                  "params": {"method": "session/update", "params": update, "_meta": {"hop": 1}}}))
    assert (end, json.loads(out)) == (End.AGENT, {"jsonrpc": "2.0", "method": "session/update", "params": update})
    asked = {"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": []}
    end, out = framing.read(line({"jsonrpc": "2.0", "id": "uuid-7", "method": "proxy/successor",
                                  "params": {"method": "session/request_permission", "params": asked}}))
    assert end is End.AGENT and json.loads(out)["id"] == "uuid-7"
    # The client's answer (the router sends it to the agent) goes back plain: the conductor
    # routes it as the answer to its envelope.
    answer = line({"jsonrpc": "2.0", "id": "uuid-7", "result": {"outcome": {"outcome": "cancelled"}}})
    assert framing.wrap(answer) == answer


def test_the_predecessors_messages_and_answers_pass_as_they_came() -> None:
    framing = SuccessorFraming()
    for message in ({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": "s"}},
                    {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}},
                    {"jsonrpc": "2.0", "id": "uuid-7", "result": {}},
                    {"jsonrpc": "2.0", "id": 3, "method": "_other/extension", "params": {}}):
        raw = line(message)
        assert framing.read(raw) == (End.CLIENT, raw)
    assert framing.read(b"not json\n") == (End.CLIENT, b"not json\n")


def test_a_plain_initialize_is_answered_saying_how_to_run_liminal() -> None:
    """An editor that starts ``liminal acp`` with no agent command (no conductor) is told why
    nothing answers, in the answer to its initialize."""
    end, out = SuccessorFraming().read(line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
    assert end is End.REPLY
    error = json.loads(out)["error"]
    assert json.loads(out)["id"] == 1 and "liminal acp -- " in error["message"]


def test_an_envelope_without_a_method_is_refused_not_forwarded() -> None:
    framing = SuccessorFraming()
    end, out = framing.read(line({"jsonrpc": "2.0", "id": "u", "method": "proxy/successor", "params": {}}))
    assert end is End.REPLY and json.loads(out)["error"]["code"] == -32600
    assert framing.read(line({"jsonrpc": "2.0", "method": "proxy/successor"})) == (End.REPLY, b"")


ids = st.one_of(st.integers(min_value=-(2**53), max_value=2**53), st.text(max_size=20))


@given(st.lists(st.tuples(ids, st.sampled_from(["session/new", "session/prompt", "session/load"])),
                max_size=8))
def test_every_request_to_the_successor_gets_its_answer_under_its_own_id(requests: list[tuple[Any, str]]) -> None:
    """Whatever ids the router's requests carry (the client's, liminal's own), each answer the
    successor gives an envelope comes back under the id of the request it wrapped."""
    framing = SuccessorFraming()
    envelopes = [json.loads(framing.wrap(line({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": {}})))
                 for rpc_id, method in requests]
    assert len({e["id"] for e in envelopes}) == len(envelopes)
    for (rpc_id, _), envelope in reversed(list(zip(requests, envelopes, strict=True))):
        end, out = framing.read(line({"jsonrpc": "2.0", "id": envelope["id"], "result": {"n": 1}}))
        assert end is End.AGENT and json.loads(out)["id"] == rpc_id
    assert framing.unanswered() == 0


class FakeStdio:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data


def test_the_stdio_sends_each_line_to_its_end_whole_and_in_order() -> None:
    stdio = FakeStdio()
    chain = ChainStdio(max_line=1000, stdio=stdio)  # type: ignore[arg-type]
    to_client: list[bytes] = []
    to_agent: list[bytes] = []
    chain._to_client = to_client.append
    chain.successor.connect(to_agent.append, lambda: None, lambda _: None)
    prompt = line({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {}})
    update = line({"jsonrpc": "2.0", "method": "proxy/successor", "params": {"method": "session/update", "params": {}}})
    data = prompt + update + update + prompt
    chain._read(data[:7])  # a line cut across reads
    chain._read(data[7:])
    assert b"".join(to_client) == prompt + prompt and len(to_client) == 2
    assert len(to_agent) == 1 and parsed(to_agent[0]) == [{"jsonrpc": "2.0", "method": "session/update", "params": {}}] * 2
    chain.successor.write(prompt)
    assert parsed(bytes(stdio.written))[0]["method"] == "proxy/successor"


def test_a_line_past_the_cap_goes_to_the_client_end_which_refuses_it() -> None:
    stdio = FakeStdio()
    chain = ChainStdio(max_line=100, stdio=stdio)  # type: ignore[arg-type]
    to_client: list[bytes] = []
    chain._to_client = to_client.append
    chain._read(b"x" * 150)
    chain._read(b"y" * 50 + b"\n" + line({"jsonrpc": "2.0", "method": "session/cancel"}))
    joined = b"".join(to_client)
    assert joined.startswith(b"x" * 150 + b"y" * 50 + b"\n") and joined.endswith(b'"session/cancel"}\n')


def test_in_a_chain_liminal_starts_no_process_of_the_agent(tmp_path: Path) -> None:
    """The conductor runs the agent: no recycle is wired (it moves threads to a new process of
    the agent command), and a component that asks for a process is told why there is none."""
    from liminal.kernel.recycle import Recycler
    from liminal.wiring import components

    settings = config.load(env={"LIMINAL_HOME": str(tmp_path)})
    assert not [c for c in components(settings, argv=[]) if isinstance(c, Recycler)]
    assert [c for c in components(settings, argv=["an-agent"]) if isinstance(c, Recycler)]

    async def ask() -> None:
        chain = ChainStdio(settings.proxy.max_frame_bytes, stdio=FakeStdio())  # type: ignore[arg-type]
        proxy = Proxy([], settings.proxy, client=chain.client, agent=chain.successor)
        with pytest.raises(OwnRequestError, match="proxy component"):
            await proxy.port.start_agent()

    anyio.run(ask)
