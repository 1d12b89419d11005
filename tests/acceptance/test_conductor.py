"""liminal as a proxy component in a chain the real ACP conductor runs: ``conductor -> liminal
acp -> adapter``, and ``conductor -> trivial proxy -> liminal acp -> trivial proxy -> adapter``
(the suite's own ``tests/support/trivial_proxy.py`` on both sides: liminal neither first nor
last).

The rig: the pinned conductor (``[tools.conductor]``, built by scripts/install-conductor into the
harness dir) launched as ``agent-client-protocol-conductor agent COMPONENT...``, each component
one shell-split command line (docs/facts.md, "The conductor and proxy chains"). Outside CI a
missing conductor skips these tests, saying so; under CI it fails them.

Few and short, for CI's time: one run of the trivial proxy alone (the rig), and the one chain
test over both Claude and both Codex adapters in the two placements.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import AcpClient, Adapter, Rig, Scenario
from fixtures.harness.acp_client import CLIENT_CAPABILITIES, AcpError
from fixtures.harness.adapters import TEE, schema_checked
from liminal.kernel.journal import SwapJournal
from tests.acceptance.conftest import adapter_fixture
from tests.support.acp_thread import liminal
from tests.support.processes import descendants

REPO = Path(__file__).resolve().parents[2]
TRIVIAL_PROXY = REPO / "tests" / "support" / "trivial_proxy.py"

adapter = adapter_fixture(["claude-agent", "claude-zed", "codex-agent", "codex-zed"])


def conductor() -> Path:
    """The pinned conductor's binary; the test skips without it (fails under CI)."""
    pin = tomllib.loads((REPO / "fixtures" / "harness" / "pins.toml").read_text(encoding="utf-8"))["tools"]["conductor"]
    harness = Path(os.environ.get("LIMINAL_HARNESS_DIR") or REPO / ".harness").expanduser()
    binary = harness / f"conductor-{pin['version']}" / "bin" / pin["bin"]
    if not binary.is_file():
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(f"the conductor is not built: scripts/install-conductor ({binary})")
        pytest.skip(f"the conductor is not built (scripts/install-conductor): {binary}")
    return binary


# How long the rig's sandbox outlives the conductor for what it left running: liminal's index
# worker, which the conductor's stop does not reach, storing the spool (no longer than that).
LINGER_SECONDS = 90


def chain(rig: Rig, *components: list[str]) -> list[str]:
    """The conductor's command line for ``components``, the adapter last, in the rig's sandbox."""
    return rig.home.wrap([str(conductor()), "agent", *(shlex.join(c) for c in components),
                          shlex.join(rig.adapter.command)], linger=LINGER_SECONDS)


def liminal_component(rig: Rig) -> list[str]:
    """``liminal acp`` as a proxy component: no agent command (the conductor is its successor).
    Its stderr to a log of the rig's (the conductor keeps a component's stderr to itself).
    Unless ``LIMINAL_TEST_ACP_SCHEMA=0``, under ``tee.py``, its stdio (both neighbours) copied
    to ``logs/component-N.in`` and ``.out`` for the schema check (``make_rig``), N being the
    index of the client the chain is for."""
    log = rig.home.logs / "stderr-liminal-in-chain.log"
    command = ["sh", "-c", f'exec "$0" "$@" 2>>{shlex.quote(str(log))}', sys.executable, "-m", "liminal", "acp"]
    if schema_checked():
        rig.home.logs.mkdir(parents=True, exist_ok=True)
        return [sys.executable, str(TEE), str(rig.home.logs / f"component-{len(rig.clients)}"), "--", *command]
    return command


def chain_client(rig: Rig, argv: list[str], env: dict[str, str] | None = None) -> AcpClient:
    n = len(rig.clients)
    client = AcpClient(argv, {**rig.home.env(), **(env or {})}, rig.home.project,
                       rig.home.logs / f"stderr-{n}-conductor.log")
    rig.clients.append(client)
    return client


@pytest.mark.parametrize("adapter", ["claude-agent"], indirect=True)
def test_the_rig_runs_a_chain_of_the_suites_own_proxy(adapter: Adapter, rig: Rig) -> None:
    """``conductor -> trivial proxy -> adapter``: the conductor, the proxy and the adapter as the
    chain tests run them (no liminal): every turn answered on one session."""
    log = rig.home.logs / "trivial-proxy.log"
    client = chain_client(rig, chain(rig, [sys.executable, str(TRIVIAL_PROXY)]), {"TRIVIAL_PROXY_LOG": str(log)})
    client.request("initialize", {"protocolVersion": 1, "clientCapabilities": CLIENT_CAPABILITIES})
    thread = client.new_session(rig.home.project)["sessionId"]
    assert client.prompt(thread, "hello through the chain", timeout=180).stop_reason == "end_turn"
    seen = log.read_text(encoding="utf-8")
    assert '"method":"proxy/initialize"' in seen and '"method": "proxy/successor"' in seen


def chain_of(rig: Rig, between: bool) -> list[str]:
    """The conductor running ``liminal acp`` before the adapter; with ``between``, a trivial
    proxy before liminal and another after it."""
    trivial = [sys.executable, str(TRIVIAL_PROXY)]
    middle = [trivial, liminal_component(rig), trivial] if between else [liminal_component(rig)]
    return chain(rig, *middle)


def wait_for_the_cli_to_write(rig: Rig, text: str, timeout: float = 60) -> None:
    """Until a session file of the CLI's holds ``text`` (the CLI writes a turn after answering
    it). The conductor stops the agent a second after the editor leaves, sooner than liminal
    does, and a Claude Code that has not written its last turn by then never does
    (docs/facts.md, "The conductor and proxy chains")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in rig.home.home.rglob("*.jsonl"):
            try:
                if text in path.read_text(errors="replace"):
                    return
            except OSError:
                continue
        time.sleep(0.1)
    raise AssertionError(f"no session file holds {text!r}: {rig.stderr_tail()}")


def said_in(replay: list[dict[str, Any]]) -> list[str]:
    return [u["update"]["content"].get("text", "") for u in replay
            if u["update"].get("sessionUpdate") == "user_message_chunk"]


def prompted(client: AcpClient, thread: str, text: str) -> str:
    """A prompt answered with end_turn; the id of its user message (``_meta.userMessageId``)."""
    result = client.request("session/prompt", {"sessionId": thread, "prompt": [{"type": "text", "text": text}]},
                            timeout=180)
    assert result["stopReason"] == "end_turn", text
    return str(result["_meta"]["userMessageId"])


def asked_again(client: AcpClient, method: str, params: dict[str, Any], until_not: str,
                timeout: float = 90) -> None:
    """``method``, asked again while liminal's answer is an error saying ``until_not``: a
    delete while the swap manager holds the thread at a turn end to decide ("is moving")."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.request(method, params, timeout=120)
            return
        except AcpError as exc:
            if until_not not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def index_worker(client: AcpClient, timeout: float = 60) -> int:
    """The pid of the chain's liminal's index worker."""
    deadline = time.monotonic() + timeout
    while True:
        found = [p.pid for p in descendants(client.proc.pid) if "liminal.ingest.worker" in p.cmdline]
        if found:
            return found[0]
        assert time.monotonic() < deadline, "no index worker in the chain"
        time.sleep(0.1)


def wait_for_file(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never made"
        time.sleep(0.05)


def wait_until_gone(client: AcpClient, program: str, timeout: float = 60) -> None:
    """Until no process the client started runs ``program`` (not as an argument: the sandbox's
    command line names it too)."""
    deadline = time.monotonic() + timeout
    while ((client.argv[0] == program and client.proc.poll() is None)  # no sandbox around it
           or any(p.cmdline.startswith(program + " ") for p in descendants(client.proc.pid))):
        assert time.monotonic() < deadline, f"{program} still runs"
        time.sleep(0.1)


def stored(rig: Rig, thread: str, text: str, timeout: float = 120) -> bool:
    """Whether ``liminal history`` (which starts no index worker) shows ``text`` in the thread
    within ``timeout``: with the rig's sandbox, the worker has exited by the time the chain's
    client is closed; without it, it may still be storing."""
    deadline = time.monotonic() + timeout
    while True:
        if text in liminal(rig, "history", thread):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)


def model_saw(rig: Rig) -> str:
    return json.dumps(rig.server.views()[-1].body)  # the model's last request


@pytest.mark.parametrize("between", [False, True], ids=["liminal-first", "between-proxies"])
def test_liminal_in_a_conductor_chain(adapter: Adapter, rig: Rig, between: bool) -> None:
    """Every turn answered, a swap inside the chain invisible (one session id), ``/context``
    answered by liminal, the thread in the store, ``session/load`` in a new chain replayed from
    the store and the model given the whole thread after it. Between two proxies, also: the
    proxy after liminal sees liminal's MCP server (the model's tools) in the session it opens,
    a ``session/rewind`` cuts the thread (after ``liminal history`` read the store beside), and
    ``session/delete`` removes it."""
    rig.server.script = Scenario()
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        "[swap]\nevery_turns = 2\nhold_timeout_seconds = 60\n")
    trivial_log = rig.home.logs / "trivial-proxies.log"
    gate = rig.home.logs / "failpoints"
    gate.mkdir()
    env = {"TRIVIAL_PROXY_LOG": str(trivial_log), "LIMINAL_FAILPOINTS": "index.round=gate",
           "LIMINAL_FAILPOINTS_DIR": str(gate)}
    prompts = ["first alpha in a chain", "second bravo", "third charlie"]
    client = chain_client(rig, chain_of(rig, between), env)
    client.request("initialize", {"protocolVersion": 1, "clientCapabilities": CLIENT_CAPABILITIES})
    thread = client.new_session(rig.home.project)["sessionId"]
    for text in prompts[:2]:
        prompted(client, thread, text)
    context = client.prompt(thread, "/context", timeout=180)
    assert context.stop_reason == "end_turn" and "Context:" in context.text, rig.stderr_tail()
    # The index worker held between two rounds (no transaction open: a swap's claim still
    # writes the store) from before the last turn until the conductor has stopped the chain and
    # exited, as a worker behind on a loaded machine is: the last turn is in the spool only, and
    # stored only if the worker outlives the conductor's stop.
    index_worker(client)
    (gate / "index.round.closed").touch()
    try:
        wait_for_file(gate / "index.round.reached")  # it looks again every quarter second
        prompted(client, thread, prompts[2])
        wait_for_the_cli_to_write(rig, prompts[2])
        closing = threading.Thread(target=client.close, kwargs={"grace": 60})
        closing.start()
        wait_until_gone(client, str(conductor()))
    finally:
        (gate / "index.round.closed").unlink()
    closing.join()
    committed = [r for r in SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
                 if r.outcome == "committed"]
    assert committed and {r.thread_id for r in committed} == {thread}, rig.stderr_tail()
    assert thread not in {r.new_backing_id for r in committed}
    # The thread in the store, as the command shows it, its last turn included, with no liminal
    # started since: the conductor's stop (its process group, 1 s and 3 s after the client
    # left) does not reach the index worker, which stores the spool and exits.
    assert stored(rig, thread, prompts[2]), rig.stderr_tail()
    [listed] = json.loads(liminal(rig, "threads", "--json"))
    assert listed["id"] == thread and listed["swaps"] >= 1
    log = (rig.home.logs / "stderr-liminal-in-chain.log").read_text(errors="replace")
    assert "proxy component started" in log and '"agent started"' not in log, log[-2000:]

    again = chain_client(rig, chain_of(rig, between), env)
    again.request("initialize", {"protocolVersion": 1, "clientCapabilities": CLIENT_CAPABILITIES})
    said = said_in(again.load_session(thread, rig.home.project, timeout=120))
    assert [t for t in said if t in prompts] == prompts, said
    delta = prompted(again, thread, "after the load delta")
    assert all(word in model_saw(rig) for word in ("alpha", "bravo", "charlie", "delta")), rig.stderr_tail()
    if between:
        opened = [json.loads(line[2:]) for line in trivial_log.read_text().splitlines()
                  if line.startswith("<") and '"session/new"' in line]
        servers = [s["name"] for m in opened if m.get("method") == "session/new"
                   for s in m["params"]["mcpServers"]]
        assert "liminal" in servers, opened
        # After ``liminal threads`` and ``liminal history`` (processes that open the store and
        # close it), the store this liminal opens for the rewind still sees what the index stores.
        assert stored(rig, thread, "after the load delta")  # the index is a few ms behind a turn
        # liminal's rewind waits for the index to have stored the turns before it.
        again.request("session/rewind", {"sessionId": thread, "toMessageId": delta}, timeout=120)
        prompted(again, thread, "after the rewind echo")
        seen = model_saw(rig)
        assert "charlie" in seen and "echo" in seen and "delta" not in seen, seen[-2000:]
        asked_again(again, "session/delete", {"sessionId": thread}, "is moving")
    again.close(grace=60)
    for c in (client, again):
        assert c.session_ids() == {thread}
    assert (json.loads(liminal(rig, "threads", "--json")) == []) is between
