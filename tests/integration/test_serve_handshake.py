"""``liminal serve``'s handshake against requests no library would send (issue 21): a header that
must come once given twice, more than one credential, and the token kept out of the log at
every level. Sent from a bare socket (``tests.support.raw_ws``)."""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.sync.client import connect

from tests.support.raw_ws import RawClient, answer_head, request, status_of
from tests.support.served import Served
from tests.support.served import serve as served_process

ORIGIN = "http://localhost:3000"


def serve(tmp_path: Path, config: str = "", **env_extra: str) -> Served:
    return served_process(tmp_path, config=f'[serve]\norigins = "{ORIGIN}"\n' + config, env=env_extra)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = serve(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def log_lines(tmp_path: Path) -> list[str]:
    return (tmp_path / "serve.log").read_text().splitlines()


def still_serves(server: Served) -> None:
    client = RawClient(server.port, server.token)
    try:
        assert client.rpc(1, "initialize", {"protocolVersion": 1})["result"]
    finally:
        client.close()


@pytest.mark.parametrize("header", ["Origin", "Authorization", "Host", "Sec-WebSocket-Key", "Sec-WebSocket-Version"])
def test_a_header_that_must_come_once_given_twice_is_a_400_and_one_line(
        served: Served, tmp_path: Path, header: str) -> None:
    """Two Origins or two Authorizations were a 500 with a MultipleValuesError traceback in the
    log; a second Host was not noticed; a second key or version was refused by the library
    without a word in the log. Each is a 400 with one line saying which header."""
    bearer = ("Authorization", f"Bearer {served.token}")
    second = {
        "Origin": [("Origin", ORIGIN), ("Origin", "https://evil.example")],
        "Authorization": [bearer, bearer],
        "Host": [bearer, ("Host", "evil.example")],
        "Sec-WebSocket-Key": [bearer, ("Sec-WebSocket-Key", base64.b64encode(os.urandom(16)).decode())],
        "Sec-WebSocket-Version": [bearer, ("Sec-WebSocket-Version", "13")],
    }[header]
    assert status_of(served.port, second) == 400
    still_serves(served)
    lines = log_lines(tmp_path)
    refused = [line for line in lines if '"connection refused"' in line]
    assert len(refused) == 1 and '"status": 400' in refused[0] and header in refused[0], refused
    assert not [line for line in lines if "Traceback" in line or "process_request failed" in line]


def test_a_handshake_the_library_refuses_after_ours_is_one_line_too(served: Served, tmp_path: Path) -> None:
    """Past liminal's checks, websockets refuses a malformed key itself (400): that said nothing
    in the log at info, and kept the connection id made for it."""
    bearer = ("Authorization", f"Bearer {served.token}")
    with request(served.port, [bearer], key="not-a-key") as sock:
        assert answer_head(sock)[0] == 400
    refused = [line for line in log_lines(tmp_path) if '"connection refused"' in line]
    assert len(refused) == 1 and '"status": 400' in refused[0] and "Sec-WebSocket-Key" in refused[0], refused
    still_serves(served)


@pytest.mark.parametrize("form", ["two parameters", "two parameters, right first", "header and parameter",
                                  "parameter and header", "offer and parameter", "two offers", "the same twice"])
def test_more_than_one_credential_is_refused(served: Served, tmp_path: Path, form: str) -> None:
    """``?token=wrong&token=RIGHT`` and ``Bearer wrong`` with ``?token=RIGHT`` were let in (any
    right one was enough). Now a request carries one credential or is refused (400), before any
    is compared, and whether they agree or not."""
    right, wrong = served.token, secrets.token_urlsafe(32)
    head: list[tuple[str, str]]
    path, head = {
        "two parameters": (f"/acp?token={wrong}&token={right}", []),
        "two parameters, right first": (f"/acp?token={right}&token={wrong}", []),
        "header and parameter": (f"/acp?token={right}", [("Authorization", f"Bearer {wrong}")]),
        "parameter and header": (f"/acp?token={wrong}", [("Authorization", f"Bearer {right}")]),
        "offer and parameter": (f"/acp?token={wrong}",
                                [("Sec-WebSocket-Protocol", f"acp, liminal.token.{right}")]),
        "two offers": ("/acp", [("Sec-WebSocket-Protocol", f"acp, liminal.token.{wrong}, liminal.token.{right}")]),
        "the same twice": (f"/acp?token={right}", [("Authorization", f"Bearer {right}")]),
    }[form]
    assert status_of(served.port, head, path=path) == 400
    refused = [line for line in log_lines(tmp_path) if '"connection refused"' in line]
    assert len(refused) == 1 and "more than one credential" in refused[0], refused
    still_serves(served)


def test_a_bearer_of_another_scheme_is_not_a_credential(served: Served) -> None:
    """A proxy in front may pass its own ``Authorization: Basic``: the token in the URL still
    counts, alone."""
    with request(served.port, [("Authorization", "Basic dXNlcjpwYXNz")], path=f"/acp?token={served.token}") as sock:
        assert answer_head(sock)[0] == 101


def test_the_token_never_reaches_the_log_at_debug(tmp_path: Path) -> None:
    """At debug the WebSocket library logged ``GET /acp?token=<token>`` and ``Authorization:
    Bearer <token>``. Now no line has the token, nor a wrong one a client offered, in any form,
    accepted or refused, whoever logged it."""
    server = serve(tmp_path, LIMINAL_LOG_LEVEL="debug")
    right = server.token
    wrongs = [secrets.token_urlsafe(32) for _ in range(6)]
    try:
        # Accepted, in each form.
        for kwargs in ({"additional_headers": {"Authorization": f"Bearer {right}"}},
                       {"subprotocols": ["acp", f"liminal.token.{right}"]}):
            with connect(server.url, open_timeout=20, **kwargs) as ws:  # type: ignore[arg-type]
                ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
                assert "result" in json.loads(ws.recv(timeout=30))
        with connect(f"{server.url}?token={right}", open_timeout=20) as ws:
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
            assert "result" in json.loads(ws.recv(timeout=30))
        # Refused: wrong tokens in each form, and two at once.
        assert status_of(server.port, [("Authorization", f"Bearer {wrongs[0]}")]) == 401
        assert status_of(server.port, [], path=f"/acp?token={wrongs[1]}") == 401
        assert status_of(server.port, [("Sec-WebSocket-Protocol", f"acp, liminal.token.{wrongs[2]}")]) == 401
        assert status_of(server.port, [("Authorization", f"Basic {wrongs[3]}")], path=f"/acp?token={wrongs[4]}") == 401
        assert status_of(server.port, [("Authorization", f"Bearer {wrongs[5]}")], path=f"/acp?token={right}") == 400
        assert status_of(server.port, [("Authorization", f"Bearer {right}"),
                                       ("Authorization", f"Bearer {right}")]) == 400
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(60)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        server.proc.wait(10)
    log = (tmp_path / "serve.log").read_text()
    # The debug lines were there (the test would pass on a quiet log), scrubbed.
    assert "GET /acp" in log and "[redacted]" in log, log[-2000:]
    for secret in [right, *wrongs]:
        assert secret not in log
