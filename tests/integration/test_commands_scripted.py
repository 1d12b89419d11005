"""liminal's context commands on a real ``liminal acp``, the real Claude harness, and the scripted
agent keeping session files as Claude Code would (``tests.support.claude_files``).

What a run of the real CLI cannot show deterministically: a command sent while a prompt of the
same thread is still running (answered, nothing changed), and marks that outlive the process
that set them and the swaps after them (``/clear MARK`` and ``/fork MARK`` after a restart).
The real CLIs' side is in tests/acceptance/test_commands.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from liminal.kernel.journal import SwapJournal
from tests.support.claude_files import session_path
from tests.support.proxy_process import ProxyProcess
from tests.support.proxy_process import run_liminal as run

pytestmark = pytest.mark.anyio

CWD = "/work/project"


async def run_liminal(home: Path, body: Callable[[ProxyProcess], Awaitable[None]], **env: str) -> None:
    """``body``, then a clean exit; liminal's store on, its MCP server off (no model here)."""
    async def then_leave(proxy: ProxyProcess) -> None:
        await body(proxy)
        await proxy.close_stdin()

    code = await run(home, then_leave, **{"LIMINAL_MCP_ENABLED": "false", "LIMINAL_SWAP_HIGH_TOKENS": "100000",
                                          "LIMINAL_SWAP_TARGET_TOKENS": "20000", **env})
    assert code == 0, (home / "liminal-home").as_posix()



async def said(proxy: ProxyProcess, thread: str, text: str) -> str:
    """A prompt answered with end_turn; the text the thread was told while it ran."""
    start = len(proxy.messages())
    answer = await proxy.prompt(thread, text)
    assert (answer.get("result") or {}).get("stopReason") == "end_turn", answer
    return "".join(m["params"]["update"]["content"]["text"] for m in proxy.messages()[start:]
                   if m.get("method") == "session/update" and m["params"].get("sessionId") == thread
                   and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk")


async def opened(proxy: ProxyProcess, thread: str | None = None) -> str:
    await proxy.request("initialize", {"protocolVersion": 1})
    if thread is None:
        found = await proxy.request("session/new", {"cwd": CWD, "mcpServers": []})
        return str(found["result"]["sessionId"])
    loaded = await proxy.request("session/load", {"sessionId": thread, "cwd": CWD, "mcpServers": []})
    assert "result" in loaded, loaded
    return thread


def session_files(home: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in (home / "claude" / "projects").glob("*/*.jsonl")}


async def test_a_command_sent_while_a_prompt_runs_is_answered_and_changes_nothing(tmp_path: Path) -> None:
    async def body(proxy: ProxyProcess) -> None:
        thread = await opened(proxy)
        await said(proxy, thread, "first turn used:5000")
        assert "Mark A set" in await said(proxy, thread, "/mark A")
        # A prompt that waits for the client's permission answer: it runs until we give it.
        await proxy.send(json.dumps({"jsonrpc": "2.0", "id": 500, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "second turn ask used:6000"}]}}).encode() + b"\n")
        ask = await proxy.wait_for(lambda m: m.get("method") == "session/request_permission")
        before = session_files(tmp_path)
        for command in ("/mark B", "/clear A", "/clear", "/undo", "/fork", "/fork A", "/optimise"):
            text = await said(proxy, thread, command)
            assert "prompt is running" in text and text.endswith("(nothing changed)"), (command, text)
        assert session_files(tmp_path) == before  # no fork, no rewrite, nothing appended
        option = ask["params"]["options"][0]["optionId"]
        await proxy.send(json.dumps({"jsonrpc": "2.0", "id": ask["id"], "result": {
            "outcome": {"outcome": "selected", "optionId": option}}}).encode() + b"\n")
        done = await proxy.wait_for(lambda m: m.get("id") == 500 and "method" not in m)
        assert done["result"]["stopReason"] == "end_turn"
        marks = await said(proxy, thread, "/marks")
        assert "A (" in marks and "B (" not in marks, marks
        context = await said(proxy, thread, "/context")
        assert "Context: 6k tokens." in context and "Marks: A" in context and "No move yet." in context
        assert re.search(r"A swap now would keep: recent \d+ turns? \(", context), context
        # What bounds the floor (issue 20): the target set, the CLI's prompt (the first turn's
        # context), the preamble's share and the recent band fitted under the rest.
        assert ("Swaps aim at 20,000 tokens (swap.target_tokens): the CLI's own prompt (about "
                "5,000 tokens), a preamble of up to 3,750") in context, context
        assert "fitted under the target: up to 11,250 tokens" in context, context
        assert SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl").records() == []

    await run_liminal(tmp_path, body)


async def test_marks_outlive_a_swap_and_a_restart(tmp_path: Path) -> None:
    state: dict[str, str] = {}

    async def before(proxy: ProxyProcess) -> None:
        thread = state["thread"] = await opened(proxy)
        await said(proxy, thread, "turn alpha used:5000")
        assert "Mark A set" in await said(proxy, thread, "/mark A")
        await said(proxy, thread, "turn bravo used:130000")  # past the trigger: a swap
        journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
        with anyio.fail_after(30):
            while not any(r.outcome == "committed" for r in journal.records()):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        await said(proxy, thread, "turn charlie used:21000")

    await run_liminal(tmp_path, before)
    thread = state["thread"]
    original = session_path(tmp_path / "claude", CWD, thread).read_bytes()

    async def after(proxy: ProxyProcess) -> None:
        await opened(proxy, thread)
        assert "A (" in await said(proxy, thread, "/marks")
        context = await said(proxy, thread, "/context")
        assert "Last move: swap compressed the model's context (" in context, context
        assert "A swap now would keep: recent " in context, context
        assert "Context: unknown" not in context, context
        fork = (await said(proxy, thread, "/fork A")).split("session ")[1].split(":")[0]
        forked = session_files(tmp_path)[fork].decode()
        # What followed the mark, across the swap: bravo in the original, charlie in the copy.
        assert "turn bravo" in forked and "turn charlie" in forked and "turn alpha" not in forked
        # /undo on the swapped thread: the copy's last turn leaves the context.
        await said(proxy, thread, "turn echo used:22000")
        assert "out of the model's context" in await said(proxy, thread, "/undo")
        journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")
        undone = journal.records()[-1]
        assert undone.outcome == "committed" and undone.reason.startswith("/undo"), undone
        assert undone.new_backing_id is not None
        kept = session_files(tmp_path)[undone.new_backing_id].decode()
        assert "turn charlie" in kept and "turn echo" not in kept
        # What followed A now has a hole (echo is out): /fork A would bring it back, so it is
        # refused; /fork forks the context as it is.
        refused = await said(proxy, thread, "/fork A")
        assert "taken out of the context after mark A (/undo)" in refused and refused.endswith("(nothing changed)")
        whole = (await said(proxy, thread, "/fork")).split("session ")[1].split(":")[0]
        assert "turn echo" not in session_files(tmp_path)[whole].decode()
        assert "cleared back to mark A" in await said(proxy, thread, "/clear A")
        moved = journal.records()[-1]
        assert moved.outcome == "committed" and moved.reason.startswith("/clear A"), moved
        # The latest command that took turns out is named, /clear A: it said the /undo before it.
        refused = await said(proxy, thread, "/fork A")
        assert "after mark A (the latest of 2: /clear A)" in refused, refused
        assert moved.new_backing_id is not None
        cleared = session_files(tmp_path)[moved.new_backing_id].decode()
        assert "turn alpha" in cleared and "turn bravo" not in cleared and "turn charlie" not in cleared
        await said(proxy, thread, "turn delta used:6000")  # the thread goes on from the mark

    await run_liminal(tmp_path, after)
    assert session_path(tmp_path / "claude", CWD, thread).read_bytes() == original


async def test_a_clear_keeps_the_threads_mode_and_options(tmp_path: Path) -> None:
    async def body(proxy: ProxyProcess) -> None:
        thread = await opened(proxy)
        await proxy.request("session/set_mode", {"sessionId": thread, "modeId": "plan"})
        await proxy.request("session/set_config_option", {"sessionId": thread, "configId": "model", "value": "opus"})
        await said(proxy, thread, "first turn used:5000")
        assert "Context cleared" in await said(proxy, thread, "/clear")
        fresh = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl").records()[-1].new_backing_id
        sent = [json.loads(line) for line in (tmp_path / "agent_in.bin").read_bytes().splitlines()]
        given = [(m["method"], m["params"]) for m in sent if m.get("params", {}).get("sessionId") == fresh
                 and m.get("method") in ("session/set_mode", "session/set_config_option")]
        assert given == [("session/set_mode", {"sessionId": fresh, "modeId": "plan"}),
                         ("session/set_config_option", {"sessionId": fresh, "configId": "model", "value": "opus"})]

    await run_liminal(tmp_path, body)


async def test_a_command_waiting_when_the_agent_dies_is_answered(tmp_path: Path) -> None:
    async def body(proxy: ProxyProcess) -> None:
        thread = await opened(proxy)
        for path in (tmp_path / "claude" / "projects").glob("*/*.jsonl"):
            path.unlink()  # as after the real CLI's session/new: no file before the first prompt
        await proxy.send(json.dumps({"jsonrpc": "2.0", "id": 777, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "/mark A"}]}}).encode() + b"\n")
        with anyio.fail_after(30):  # /mark is looking for the file (for up to 2 s) when the agent dies
            while b'"waiting for the session file"' not in proxy.stderr:  # noqa: ASYNC110 - its log is the event
                await anyio.sleep(0.01)
        assert not [m for m in proxy.messages() if m.get("id") == 777], "answered before the agent died"
        await proxy.send(b'{"jsonrpc":"2.0","id":778,"method":"_die","params":{"code":3}}\n')
        assert await proxy.wait_exit() == 3
        answers = [m for m in proxy.messages() if m.get("id") == 777 and "method" not in m]
        assert len(answers) == 1, proxy.messages()[-5:]

    await run(tmp_path, body, LIMINAL_MCP_ENABLED="false", LIMINAL_LOG_LEVEL="debug")


def turns_of(home: Path, backing: str) -> tuple[int, bool]:
    """How many prompts the session file holds, and whether a compaction's summary precedes
    them (read here, not by the harness under test)."""
    prompts, summary = 0, False
    for line in session_path(home / "claude", CWD, backing).read_bytes().splitlines():
        record = json.loads(line)
        if record.get("type") != "user" or record.get("isMeta"):
            continue
        if record.get("isCompactSummary"):
            summary = summary or prompts == 0
            continue
        content = record["message"]["content"]
        blocks = [{"type": "text"}] if isinstance(content, str) else content
        if not any(b.get("type") == "tool_result" for b in blocks):
            prompts += 1
    return prompts, summary


async def test_undo_right_after_a_swap_that_kept_one_turn(tmp_path: Path) -> None:
    """Found by the lead with the real CLI: after a swap whose rewrite kept one turn whole (the
    preamble, then that turn), /undo said "SwapError: there is no earlier turn to go back to
    (nothing changed)", and /context "Last swap: failed, unknown -> unknown tokens, SwapError:
    ...". The turn leaves the context and the preamble stays; once only the preamble is left,
    /undo says so and journals nothing."""
    journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")

    async def body(proxy: ProxyProcess) -> None:
        thread = await opened(proxy)
        await said(proxy, thread, "turn alpha used:5000")
        await said(proxy, thread, "turn bravo used:130000")  # past the trigger: a swap
        with anyio.fail_after(30):
            while not journal.records():  # noqa: ASYNC110 - another process writes it
                await anyio.sleep(0.05)
        [swap] = journal.records()
        assert swap.outcome == "committed" and swap.new_backing_id is not None, swap
        assert turns_of(tmp_path, swap.new_backing_id) == (1, True)  # the preamble, then bravo

        assert "out of the model's context" in await said(proxy, thread, "/undo")
        undone = journal.records()[-1]
        assert (undone.outcome, undone.move, undone.old_backing_id) == ("committed", "/undo", swap.new_backing_id)
        assert undone.new_backing_id is not None
        kept = session_files(tmp_path)[undone.new_backing_id].decode()
        assert "This session is being continued" in kept and "turn bravo" not in kept
        assert turns_of(tmp_path, undone.new_backing_id) == (0, True)
        context = await said(proxy, thread, "/context")
        assert "Last move: /undo took the last turn out of the model's context (" in context, context
        assert "unknown" not in context and "committed" not in context, context

        # Only the preamble left: nothing to take out, and nothing journaled.
        refused = await said(proxy, thread, "/undo")
        assert refused == ("no turn is left in the model's context, only the summary of earlier ones "
                           "(/clear empties it, /clear MARK goes back to a mark) (nothing changed)"), refused
        assert journal.records()[-1] == undone

        # The thread goes on from the preamble.
        await said(proxy, thread, "turn charlie used:9000")
        assert "out of the model's context" in await said(proxy, thread, "/undo")
        again = journal.records()[-1]
        assert again.new_backing_id is not None and again.old_backing_id == undone.new_backing_id
        assert turns_of(tmp_path, again.new_backing_id) == (0, True)

    await run_liminal(tmp_path, body, LIMINAL_SWAP_TARGET_TOKENS="1000",
                      LIMINAL_GRADIENT_RECENT_TOKENS="0", LIMINAL_GRADIENT_MIDDLE_TOKENS="0",
                      LIMINAL_GRADIENT_SUMMARY_TOKENS="100")


async def test_undo_of_a_sessions_only_turn_empties_the_context(tmp_path: Path) -> None:
    """The first prompt of a fresh session has nothing before it: /undo leaves the context
    empty, as /clear does (a new session of the agent), and says so; a second /undo finds the
    context empty at once."""
    journal = SwapJournal(tmp_path / "liminal-home" / "swaps.jsonl")

    async def body(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1})
        found = await proxy.request("session/new", {"cwd": CWD, "mcpServers": []})
        thread = str(found["result"]["sessionId"])
        await said(proxy, thread, "the first question alpha used:5000")
        assert turns_of(tmp_path, thread) == (1, False)
        answer = await said(proxy, thread, "/undo")
        assert answer.startswith("Took out the only turn: the model's context is empty now"), answer
        [moved] = journal.records()
        assert (moved.outcome, moved.move, moved.opened, moved.reason) == ("committed", "/undo", "empty", "/undo")
        assert (await said(proxy, thread, "/undo")) == (
            "the model's context is empty: there is no turn to take out (nothing changed)")
        assert journal.records() == [moved]
        await said(proxy, thread, "after the undo bravo used:5000")
        assert turns_of(tmp_path, str(moved.new_backing_id)) == (1, False)

    # Sessions start with no file, as the CLI's: it writes one at the first turn.
    await run_liminal(tmp_path, body, AGENT_CLAUDE_NEW_EMPTY="1")


async def test_a_memo_as_the_first_message_of_a_new_home_is_kept(tmp_path: Path) -> None:
    """A person's first words to a new install are ``/memo ...``: the store does not exist yet
    (the index worker makes it at its first write), and the memo is kept all the same, then
    found by ``/memos`` and after a restart."""
    async def first(proxy: ProxyProcess) -> None:
        thread = await opened(proxy)
        told = await said(proxy, thread, "/memo the staging port is 8443")
        assert told.startswith("Memo kept"), told
        assert "8443" in await said(proxy, thread, "/memos")

    async def later(proxy: ProxyProcess) -> None:
        thread = await opened(proxy)
        assert "8443" in await said(proxy, thread, "/memos")

    assert not (tmp_path / "liminal-home" / "liminal.db").exists()
    await run_liminal(tmp_path, first)
    await run_liminal(tmp_path, later)


async def test_a_search_waits_for_the_index_to_store_the_turns_before_it(tmp_path: Path) -> None:
    """The index runs a little behind a turn (under load, seconds): a /search right after a turn
    found nothing of it (a full run's test_commands, on Claude Code). Here the index is held
    between two rounds (the ``index.round`` gate) before the turn, and let go only once the
    search is waiting for it: the search finds the turn."""
    gate = tmp_path / "failpoints"
    gate.mkdir()

    async def body(proxy: ProxyProcess) -> None:
        thread = await opened(proxy)
        await said(proxy, thread, "turn alpha zebra-11")
        (gate / "index.round.closed").touch()
        with anyio.fail_after(30):
            while not (gate / "index.round.reached").exists():  # noqa: ASYNC110 (the worker's file)
                await anyio.sleep(0.02)
        await said(proxy, thread, "turn bravo quokka-22")
        start = len(proxy.messages())
        await proxy.send(json.dumps({"jsonrpc": "2.0", "id": "search", "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "/search quokka-22"}]}}).encode() + b"\n")
        waiting = b"waiting for the store to hold the thread's last turns"
        with anyio.fail_after(30):
            while waiting not in proxy.stderr and not [  # noqa: ASYNC110 (liminal's stderr)
                    m for m in proxy.messages()[start:] if m.get("id") == "search"]:
                await anyio.sleep(0.02)
        (gate / "index.round.closed").unlink()
        await proxy.wait_for(lambda m: m.get("id") == "search")
        found = "".join(m["params"]["update"]["content"]["text"] for m in proxy.messages()[start:]
                        if m.get("method") == "session/update"
                        and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk")
        assert "you: turn bravo quokka-22" in found and "still storing" not in found, found

    await run_liminal(tmp_path, body, LIMINAL_FAILPOINTS="index.round=gate", LIMINAL_FAILPOINTS_DIR=str(gate))
