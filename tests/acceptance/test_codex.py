"""The invisible swap and the context commands with the real Codex, both adapters (issue 14).

The same kind of scripted conversation as ``test_swap`` (22 turns, single, parallel and long tool
calls) runs through ``liminal acp`` with a low threshold, against the strict fake Responses API:
it refuses an output whose call is missing and a call left without its output, and reports input
tokens from the size of what it receives, so the thresholds are crossed as in real use.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from fixtures.harness import AcpClient, Adapter, Reply, Rig, Scenario, Shell, Text, adapters
from fixtures.harness.anthropic import tokens
from liminal.gradient.summarize import PREAMBLE_INTRO
from liminal.kernel.journal import SwapJournal, SwapRecord
from tests.acceptance.conftest import adapter_fixture
from tests.support.listing import LISTING, LISTING_END
from tests.support.mongo import liminal_on_mongodb, needs_mongo_socket, recorded

CODEX = sorted(n for n, a in adapters().items() if a.model_api == "openai")
adapter = adapter_fixture(CODEX)

KINDS = ["plain question", "BASH list", "PAR count", "BIG read", "plain follow-up"]
PROMPTS = [f"turn {n}: {KINDS[n % len(KINDS)]} please" for n in range(22)]
BIG_OUTPUT = "\n".join(str(n) for n in range(10000, 12001))  # ~12 KB, ~3k tokens


def scenario() -> Scenario:
    return (
        Scenario()
        .add("BASH", Shell(LISTING, "List"), "listed them")
        .add("PAR", Reply((Text("Three at once."), Shell("seq 1 40", "a"), Shell("seq 1 60", "b"),
                           Shell("seq 1 80", "c"))), "counted all three")
        .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
        .add("TOOL", Shell("echo tool-output-here", "Echo"), "the tool ran")
    )


def configure(rig: Rig, high: int, target: int) -> None:
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    with (rig.home.liminal_home / "config.toml").open("a") as config:  # after a [store] if set
        config.write(
            f"[swap]\nhigh_tokens = {high}\ntarget_tokens = {target}\nhold_timeout_seconds = 60\n"
            "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n")


def liminal_client(rig: Rig) -> AcpClient:
    n = len(rig.clients)
    client = AcpClient(rig.home.liminal_argv(), rig.home.env(), rig.home.project,
                       rig.home.logs / f"stderr-{n}-liminal.log")
    rig.clients.append(client)
    return client


def journal(rig: Rig) -> list[SwapRecord]:
    return SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()


def rollouts(rig: Rig) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in rig.home.codex_home.glob("sessions/*/*/*/rollout-*.jsonl")}


def said(client: AcpClient, thread: str, text: str) -> str:
    result = client.prompt(thread, text, timeout=180)
    assert result.stop_reason == "end_turn", text
    assert result.text, f"no answer to {text!r}"
    return result.text


def last_input(rig: Rig) -> list[dict[str, Any]]:
    items = rig.server.responses_requests()[-1].json["input"]
    assert isinstance(items, list)
    return items


def test_the_codex_conversation_goes_on_across_swaps(adapter: Adapter, rig: Rig) -> None:
    codex_swaps(rig)


@needs_mongo_socket
def test_the_codex_conversation_goes_on_across_swaps_with_the_store_on_mongodb(
        make_rig: Callable[..., Rig]) -> None:
    """The same with MongoDB as the store: the reloaded thread's history replays from it, every
    rollout of the thread is indexed into it."""
    rig = make_rig("codex-agent")
    with liminal_on_mongodb(rig.home.liminal_home):
        codex_swaps(rig)
        assert not (rig.home.liminal_home / "liminal.db").exists()


def codex_swaps(rig: Rig) -> None:
    rig.server.script = scenario()
    base = rig.overhead()
    # The leeway (high - target) must exceed the biggest turn (BIG: ~5k tokens).
    high, target = base + 9_000, base + 4_000
    configure(rig, high, target)
    first_request = len(rig.server.responses_requests())
    snapshots: list[dict[Path, bytes]] = []
    client = liminal_client(rig)
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for text in PROMPTS:
            said(client, thread, text)
            snapshots.append(rollouts(rig))
        listing = client.request("session/list", {"cwd": str(rig.home.project)})["sessions"]
    swaps = journal(rig)
    committed = [s for s in swaps if s.outcome == "committed"]
    assert len(committed) >= 2, (swaps, rig.stderr_tail())
    assert all(s.thread_id == thread and s.harness == "codex" for s in swaps), swaps

    # The client saw one thread id, never a backing one, and no history replayed at it.
    assert client.session_ids() == {thread}
    everything = b"\n".join(f.raw for f in client.received)
    for swap in committed:
        assert swap.new_backing_id is not None and swap.new_backing_id.encode() not in everything
    assert not [f for f in client.received if b'"user_message_chunk"' in f.raw]
    assert [s["sessionId"] for s in listing].count(thread) == 1

    # After the first swap the model saw a context inside the band, with the recent turns whole
    # and every output after its call (the strict server refused nothing: the rig checks).
    requests = rig.server.responses_requests()[first_request:]
    first_swap_at = committed[0].started_at + committed[0].duration_s
    after = [r for r in requests if r.t > first_swap_at]
    assert after
    for request in after:
        assert tokens(len(request.raw)) <= high + 6_000, "context escaped the band"
    last = json.dumps(last_input(rig))
    for prompt in PROMPTS:  # verbatim in a kept turn, or in the consolidated summary
        assert prompt in last, prompt
    assert PREAMBLE_INTRO[:60] in last
    assert BIG_OUTPUT not in last  # the first BIG turn's full output is long gone
    recent = [i for i in last_input(rig) if i.get("type") == "function_call_output"][-1]
    # The last BASH turn's output, whole: to its last line (it was "cbt", the 60th program in
    # this machine's /usr/bin, which a machine with more programs does not list there).
    assert "[liminal: " not in json.dumps(recent) and json.dumps(LISTING_END)[1:-1] in json.dumps(recent)

    # A new liminal client (an editor restarted) loads the thread: it lives on a compressed
    # rollout now, but the history replayed is the conversation as it happened, from the store.
    with liminal_client(rig) as reloaded:
        reloaded.initialize()
        replay = reloaded.load_session(thread, rig.home.project, timeout=120)
    user_texts = [u["update"]["content"].get("text", "") for u in replay
                  if u["update"].get("sessionUpdate") == "user_message_chunk"]
    assert user_texts == PROMPTS, (user_texts, rig.stderr_tail())
    assert reloaded.session_ids() == {thread}

    # The store has the thread from the frames, and every rollout of it from the tailing (a
    # rewrite's own bytes marked as liminal's), the full outputs recall reads included.
    async def indexed() -> None:
        async with recorded(rig.home.liminal_home) as store:
            said = [m.text for m in await store.messages(thread) if m.kind == "user" and not m.replayed]
            assert said == PROMPTS
            original = await store.session_records(thread)
            assert any(BIG_OUTPUT[:200] in r.text for r in original)
            notes = SwapJournal(rig.home.liminal_home / "swaps.jsonl")
            for swap in committed:
                assert swap.new_backing_id is not None
                own = notes.own_bytes(swap.new_backing_id)
                records = await store.session_records(swap.new_backing_id)
                # liminal's lines marked as its own (kept for recall, never a search hit),
                # the CLI's after them.
                assert own and records and records[0].offset == 0, swap
                assert [r.own for r in records] == [r.offset < own for r in records], swap

    anyio.run(indexed)

    # The CLI's rollouts were only ever appended to, by the CLI; each rewrite is a rollout of its
    # own whose session_meta names it and the rollout it came from.
    final = rollouts(rig)
    side = str(rig.home.liminal_home / "side").encode()  # liminal's summaries' side sessions (issue 24)
    for snapshot in snapshots:
        for path, content in snapshot.items():
            if side in content.split(b"\n", 1)[0] and path not in final:
                continue  # a side session's rollout, removed once its summary was read
            assert final[path].startswith(content), f"{path.name} was rewritten in place"
    for swap in committed:
        path = next(p for p in final if p.name.endswith(f"-{swap.new_backing_id}.jsonl"))
        meta = json.loads(final[path].splitlines()[0])
        assert meta["type"] == "session_meta" and meta["payload"]["id"] == swap.new_backing_id
        assert meta["payload"]["forked_from_id"] == swap.old_backing_id
        assert path.stat().st_mode & 0o777 == 0o600


def codex_cli(adapter: Adapter) -> Path | None:
    cli = adapter.prefix / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
    return cli if cli.is_file() else None


def test_codex_itself_lists_and_resumes_a_rewrite(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    configure(rig, 1_000_000, 900_000)
    (rig.home.liminal_home / "config.toml").write_text(
        "[swap]\nevery_turns = 3\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 300\nmiddle_tokens = 300\nsummary_tokens = 600\n")
    with liminal_client(rig) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for text in ("first ask alpha", "second TOOL bravo", "third charlie", "fourth delta"):
            said(client, thread, text)
    committed = [s for s in journal(rig) if s.outcome == "committed"]
    assert committed, rig.stderr_tail()
    rewrite = committed[-1].new_backing_id
    assert rewrite is not None

    # Codex's own listing (the adapter, without liminal) has the rewrite, in the project.
    with rig.client(via_liminal=False) as direct:
        direct.initialize()
        listed = direct.request("session/list", {"cwd": str(rig.home.project)})["sessions"]
        assert rewrite in [s["sessionId"] for s in listed], listed
        # And resumes it: the next request carries its history.
        direct.load_session(rewrite, rig.home.project, timeout=120)
        said(direct, rewrite, "direct echo")
    seen = json.dumps(last_input(rig))
    assert "first ask alpha" in seen and "fourth delta" in seen and "direct echo" in seen

    # The CLI itself, non-interactively: ``codex exec resume ID PROMPT``.
    cli = codex_cli(adapter)
    if cli is None:
        return  # the Rust adapter bundles no CLI; the other adapter's run covers it
    argv = rig.home.wrap(["node", str(cli), "exec", "--skip-git-repo-check", "resume", rewrite,
                          "from the cli"])
    done = subprocess.run(argv, env=rig.home.env(), cwd=rig.home.project, capture_output=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    seen = json.dumps(last_input(rig))
    assert "first ask alpha" in seen and "from the cli" in seen


def test_mark_and_clear_rewind_a_codex_thread(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "first question alpha")
        # codex-zed sends its command list from a task of its own: it can come after the first
        # prompt's answer (docs/facts.md), so wait for it rather than look once.
        client.wait_for(lambda frames: any(b'"available_commands_update"' in f.raw for f in frames), timeout=30)
        assert any(b'"available_commands_update"' in f.raw and b'"mark"' in f.raw for f in client.received), \
            "liminal's commands are offered beside Codex's"
        said(client, thread, "second question TOOL bravo")
        assert "Mark A set" in said(client, thread, "/mark A")
        for word in ("charlie", "delta"):
            said(client, thread, f"later question {word}")
        assert not any("/mark" in json.dumps(r.json) for r in rig.server.responses_requests())
        # /fork A: a rollout of what followed A, which Codex lists; the thread is unchanged.
        fork = said(client, thread, "/fork A").split("session ")[1].split(":")[0]
        listed = client.request("session/list", {"cwd": str(rig.home.project)})["sessions"]
        assert fork in [s["sessionId"] for s in listed]
        context = said(client, thread, "/context")
        assert "A swap now would keep: recent " in context and "Marks: A" in context, context
        assert "cleared back to mark A" in said(client, thread, "/clear A")
        said(client, thread, "after the clear foxtrot")
        seen = json.dumps(last_input(rig))
        assert "alpha" in seen and "bravo" in seen and "tool-output-here" in seen
        assert not any(w in seen for w in ("charlie", "delta"))
        assert "out of the model's context" in said(client, thread, "/undo")
        said(client, thread, "after the undo golf")
        seen = json.dumps(last_input(rig))
        assert "bravo" in seen and "foxtrot" not in seen and "golf" in seen
    assert client.session_ids() == {thread}


def test_a_failed_codex_swap_leaves_the_thread_on_its_rollout(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    (rig.home.liminal_home).mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        "[swap]\nevery_turns = 2\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 300\nmiddle_tokens = 300\nsummary_tokens = 600\n")
    client = AcpClient(rig.home.liminal_argv(), {**rig.home.env(), "LIMINAL_FAILPOINTS": "swap.corrupt_rewrite=1"},
                       rig.home.project, rig.home.logs / "stderr-failing-liminal.log")
    rig.clients.append(client)
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for text in ("one TOOL alpha", "two bravo", "three charlie", "four delta", "five echo"):
            said(client, thread, text)
    swaps = journal(rig)
    assert swaps and all(s.outcome == "failed" for s in swaps), swaps
    # Why, in words (it was the exception's name, "RolloutError: ...").
    assert swaps[0].reason.startswith("the rewrite could not be made: ") and "Error" not in swaps[0].reason
    # No attempt left a rollout behind, the thread stayed on its one rollout, the model saw it all.
    assert [p.name.endswith(f"-{thread}.jsonl") for p in rollouts(rig)] == [True], list(rollouts(rig))
    seen = json.dumps(last_input(rig))
    assert "tool-output-here" in seen and all(w in seen for w in ("alpha", "charlie", "echo"))
    assert client.session_ids() == {thread}


def floor_lines(context: str) -> tuple[str, str, str]:
    """What ``/context`` says of the thread's calibration: where it swaps and down to what, the
    CLI's own prompt as measured, and the back-off of the trigger."""
    lines = context.splitlines()
    backed = next((line for line in lines if line.startswith("The trigger backed off")), "")
    return lines[0], lines[1], backed.split(" to ")[0]


def test_context_after_a_restart_shows_the_calibrated_figures(adapter: Adapter, rig: Rig) -> None:
    """A new liminal process that loads a thread learns its pace again: the CLI's own prompt as
    the thread's first turn measured it, the floor and the trigger's back-off its swaps
    journaled. /context says what the process that ran the turns said. (Before, it fell back to
    a default prompt of 20k: 'down to about 21.2k' with the context at 21.9k, the trigger back
    where it was set, and swaps decided from those guesses.)"""
    rig.server.script = scenario()
    base = rig.overhead()
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {base + 6_000}\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n")
    with liminal_client(rig) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n in range(6):
            said(client, thread, f"turn {n}: BIG read please")
        before = said(client, thread, "/context")
    assert journal(rig), rig.stderr_tail()  # a swap was tried: its rewrite measured the floor
    with liminal_client(rig) as client:
        client.initialize()
        client.request("session/load", {"sessionId": thread, "cwd": str(rig.home.project), "mcpServers": []},
                       timeout=120)
        after = said(client, thread, "/context")
    assert "the CLI's own prompt (about " in before and "The trigger backed off" in before, before
    assert floor_lines(after) == floor_lines(before), (before, after)
