"""The invisible swap with the real Claude Code, both adapter generations.

A scripted conversation of 22 turns with tool calls (single, parallel, long output) runs through
``liminal acp`` with a low threshold, so the context crosses it several times. The client must
see one thread id throughout and no replayed history, every turn must be answered, the strict
fake model must accept every request and see a context that stays in the configured band with
the recent turns intact, and the CLI's own files must only ever have been appended to by the
CLI. Then the failure paths, each through a failpoint in a real liminal process: a rewrite the
validator refuses, a resume the adapter refuses, the adapter dying mid-swap.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from fixtures.harness import AcpClient, Adapter, Reply, Rig, Scenario, Shell, Text
from fixtures.harness.anthropic import tokens
from liminal.gradient.summarize import PREAMBLE_INTRO
from liminal.kernel.journal import SwapJournal, SwapRecord
from tests.acceptance.conftest import CLAUDE_NAMES as CLAUDE
from tests.acceptance.conftest import adapter_fixture
from tests.support.listing import LISTING
from tests.support.mongo import liminal_on_mongodb, needs_mongo_socket, recorded

KINDS = ["plain question", "BASH list", "PAR count", "BIG read", "plain follow-up"]
PROMPTS = [f"turn {n}: {KINDS[n % len(KINDS)]} please" for n in range(22)]
BIG_OUTPUT = "\n".join(str(n) for n in range(10000, 12001))  # ~12 KB, ~3k tokens


adapter = adapter_fixture(CLAUDE)


def scenario() -> Scenario:
    return (
        Scenario()
        .add("BASH", Shell(LISTING, "List"), "listed them")
        .add("PAR", Reply((Text("Three at once."), Shell("seq 1 40", "a"), Shell("seq 1 60", "b"),
                           Shell("seq 1 80", "c"))), "counted all three")
        .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
    )


def configure(rig: Rig, base: int) -> tuple[int, int]:
    # The leeway (high - target) must exceed the biggest turn (BIG: ~5k tokens), or every
    # turn would trigger a swap; the same holds at the real 120k/100k defaults.
    high, target = base + 9_000, base + 4_000
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    with (rig.home.liminal_home / "config.toml").open("a") as config:  # after a [store] if set
        config.write(
            f"[swap]\nhigh_tokens = {high}\ntarget_tokens = {target}\nhold_timeout_seconds = 60\n"
            "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n"
        )
    return high, target


def liminal_client(rig: Rig, **env: str) -> AcpClient:
    n = len(rig.clients)
    client = AcpClient(rig.home.liminal_argv(), {**rig.home.env(), **env}, rig.home.project,
                       rig.home.logs / f"stderr-{n}-liminal.log")
    rig.clients.append(client)
    return client


def journal(rig: Rig) -> list[SwapRecord]:
    return SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()


def session_files(rig: Rig) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in rig.home.claude_config.glob("projects/*/*.jsonl")}


def listing_supported(initialized: dict[str, Any]) -> bool:
    capabilities = initialized.get("agentCapabilities") or {}
    return "list" in (capabilities.get("sessionCapabilities") or {})


def listed(client: AcpClient, rig: Rig) -> list[str]:
    result = client.request("session/list", {"cwd": str(rig.home.project)})
    return [entry["sessionId"] for entry in result["sessions"]]


def run_conversation(rig: Rig, client: AcpClient, thread: str, prompts: list[str],
                     snapshots: list[dict[Path, bytes]]) -> None:
    for text in prompts:
        result = client.prompt(thread, text, timeout=180)
        assert result.stop_reason == "end_turn", rig.stderr_tail()
        assert result.text, f"no answer to {text!r}"
        snapshots.append(session_files(rig))


def test_the_conversation_goes_on_across_several_swaps(adapter: Adapter, rig: Rig) -> None:
    several_swaps(rig)


@needs_mongo_socket
def test_the_conversation_goes_on_across_several_swaps_with_the_store_on_mongodb(
        make_rig: Callable[..., Rig]) -> None:
    """The same with MongoDB as the store: the reloaded thread's history replays from it, each
    swap is recorded in it, each new session file indexed into it from where the rewrite ended."""
    rig = make_rig("claude-agent")
    with liminal_on_mongodb(rig.home.liminal_home):
        several_swaps(rig)
        assert not (rig.home.liminal_home / "liminal.db").exists()


def several_swaps(rig: Rig) -> None:
    rig.server.script = scenario()
    high, _ = configure(rig, rig.overhead())
    first_request = len(rig.server.messages_requests())
    snapshots: list[dict[Path, bytes]] = []
    client = liminal_client(rig)
    with client:
        lists = listing_supported(client.initialize())
        thread = client.new_session(rig.home.project)["sessionId"]
        run_conversation(rig, client, thread, PROMPTS, snapshots)
        listing = listed(client, rig) if lists else []
    swaps = journal(rig)
    committed = [s for s in swaps if s.outcome == "committed"]
    assert len(committed) >= 2, (swaps, rig.stderr_tail())
    assert all(s.thread_id == thread for s in swaps)
    if lists:
        # The agent lists every rewrite as a session of its own; the client sees the thread
        # once, and so does the next liminal, which learns the lineage from the journal.
        with liminal_client(rig) as again:
            again.initialize()
            relisted = listed(again, rig)
        backings = {s.new_backing_id for s in committed}
        for ids in (listing, relisted):
            assert ids.count(thread) == 1 and not backings & set(ids), (ids, backings)

    # A new liminal client (an editor restarted) loads the thread: it lives on a compressed
    # session now, but the history replayed is the conversation as it happened, from the store.
    with liminal_client(rig) as reloaded:
        reloaded.initialize()
        replay = reloaded.load_session(thread, rig.home.project, timeout=120)
    user_texts = [u["update"]["content"].get("text", "") for u in replay
                  if u["update"].get("sessionUpdate") == "user_message_chunk"]
    assert user_texts == PROMPTS, (user_texts, rig.stderr_tail())
    assert not [t for t in user_texts if PREAMBLE_INTRO.strip()[:40] in t]
    answers = "".join(u["update"]["content"].get("text", "") for u in replay
                      if u["update"].get("sessionUpdate") == "agent_message_chunk")
    assert "listed them" in answers and "read it" in answers
    assert [u for u in replay if u["update"].get("sessionUpdate") == "tool_call"
            and json.dumps(BIG_OUTPUT)[1:-1] in json.dumps(u)], "the first BIG output, uncut"
    assert reloaded.session_ids() == {thread}

    # The client saw one thread id, and no history replayed at it.
    assert client.session_ids() == {thread}
    everything = b"\n".join(f.raw for f in client.received)
    for swap in committed:
        assert swap.new_backing_id is not None
        assert swap.new_backing_id.encode() not in everything
    assert not [f for f in client.received if b'"user_message_chunk"' in f.raw]

    # The model saw a context inside the band after the first swap, with the recent turns intact.
    requests = rig.server.messages_requests()[first_request:]
    assert len(requests) >= len(PROMPTS)
    first_swap_at = committed[0].started_at + committed[0].duration_s
    after = [r for r in requests if r.t > first_swap_at]
    assert after
    biggest_turn = 6_000  # the BIG turn's output and its answer, with room
    for request in after:
        assert tokens(len(request.raw)) <= high + biggest_turn, "context escaped the band"
    last = json.dumps(requests[-1].json["messages"])
    assert PROMPTS[-1] in last and PROMPTS[-2] in last
    for prompt in PROMPTS:  # verbatim in a kept turn, or in the consolidated preamble
        assert prompt in last, prompt
    assert BIG_OUTPUT not in last  # the first BIG turn's full output is long gone

    # The store indexed each new session file whole: the records liminal wrote (copies of ones
    # indexed from the older file) marked as liminal's, the CLI's after them.
    async def own_writes_marked() -> None:
        async with recorded(rig.home.liminal_home) as store:
            notes = SwapJournal(rig.home.liminal_home / "swaps.jsonl")
            for swap in committed:
                assert swap.new_backing_id is not None
                own = notes.own_bytes(swap.new_backing_id)
                records = await store.session_records(swap.new_backing_id)
                # liminal's lines marked as its own (kept for recall, never a search hit),
                # the CLI's after them.
                assert own and records and records[0].offset == 0, swap
                assert [r.own for r in records] == [r.offset < own for r in records], swap
            assert await store.session_records(committed[0].new_backing_id or "")  # turns after it
            # Each swap is in the store too, with the conversation, between its turns.
            noted = [m for m in await store.messages(thread) if m.kind == "swap"]
            assert [(m.data["new_backing_id"], m.status) for m in noted] == [
                (s.new_backing_id, s.outcome) for s in swaps]

    anyio.run(own_writes_marked)

    # The CLI's files were only ever appended to, and only by the CLI, under their own ids.
    final = session_files(rig)
    for snapshot in snapshots:
        for path, content in snapshot.items():
            assert final[path].startswith(content), f"{path.name} was rewritten in place"
    for swap in committed:
        old = next(p for p in final if p.stem == swap.old_backing_id)
        ids = {json.loads(line).get("sessionId") for line in final[old].splitlines() if line.strip()}
        assert ids <= {swap.old_backing_id, None}


@pytest.mark.parametrize("failpoint", ["swap.corrupt_rewrite=1", "swap.resume=wrong-id"])
def test_a_failed_swap_leaves_the_thread_working_on_its_session(
    adapter: Adapter, rig: Rig, failpoint: str
) -> None:
    rig.server.script = scenario()
    configure(rig, rig.overhead())
    client = liminal_client(rig, LIMINAL_FAILPOINTS=failpoint)
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        run_conversation(rig, client, thread, PROMPTS[:16], [])
    swaps = journal(rig)
    # Every attempt failed; one the client's leaving cut short says so (it is not a failure).
    assert swaps and swaps[0].outcome == "failed", swaps
    assert all(s.outcome == "failed" or "the client closed its connection during the swap" in s.reason
               for s in swaps), swaps
    # Said in words, the step that broke first (it was "ValidationError: ...", "OwnRequestError: ...").
    expected = ("the rewrite could not be made: rewrite refused" if "corrupt" in failpoint
                else "the agent did not open the new session: the agent refused session/resume")
    assert swaps[0].reason.startswith(expected), swaps[0]
    # No attempt left its rewrite behind (the CLI's own files are its business).
    left = {p.stem for p in rig.home.claude_config.glob("projects/*/*.jsonl")}
    assert not left & {s.new_backing_id for s in swaps}, left
    assert client.session_ids() == {thread}
    # The model still sees the original, uncompressed session: every turn, every tool output.
    last = json.dumps(rig.server.messages_requests()[-1].json["messages"])
    for prompt in PROMPTS[:16]:
        assert prompt in last
    assert json.dumps(BIG_OUTPUT)[1:-1] in last


def test_the_adapter_dying_mid_swap_loses_nothing(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    configure(rig, rig.overhead())
    client = liminal_client(rig, LIMINAL_FAILPOINTS="swap.move=kill-agent")
    answered: list[str] = []
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        try:
            for text in PROMPTS:
                client.prompt(thread, text, timeout=180)
                answered.append(text)
        except Exception:
            pass
        code = client.proc.wait(60)
    assert code != 0  # liminal says the agent died, and exits
    assert 0 < len(answered) < len(PROMPTS)
    [swap] = journal(rig)
    assert swap.outcome == "failed"
    # A new liminal: the thread loads on its original session and answers the next turn.
    again = liminal_client(rig)
    with again:
        again.initialize()
        replay: list[dict[str, Any]] = again.load_session(thread, rig.home.project)
        assert replay
        result = again.prompt(thread, "after the crash: plain question please", timeout=180)
        assert result.stop_reason == "end_turn" and result.text
    assert again.session_ids() == {thread}
    last = json.dumps(rig.server.messages_requests()[-1].json["messages"])
    assert answered[-1] in last
