"""Swaps for a client that starts liminal for every prompt (acpx 0.1.15): a real ``liminal acp``
over the scripted agent keeping Claude Code session files (``tests.support.claude_files``), the
real Claude harness and gradient.

Such a client loads its thread, sends one prompt, and closes liminal's input as soon as the answer
is in (acpx: then SIGTERM 0.1 s later, SIGKILL at 1.6 s), the very moment a swap decided at that
turn end begins. Before, the stop abandoned every such swap (``stopped during the swap
(CancelledError)``), and the next process loaded the thread past its trigger without swapping it
either: no automatic swap ever committed. Now the stop gives the swap ``proxy.stop_grace_seconds``
to finish, and a thread loaded past its trigger swaps before its first prompt.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
from pathlib import Path

import anyio
import pytest

from liminal.kernel.journal import SwapJournal, SwapRecord
from tests.support.claude_files import session_path
from tests.support.proxy_process import ProxyProcess, run_liminal

pytestmark = pytest.mark.anyio

CWD = "/work/project"
# The trigger and the target; the agent takes 0.5 s to open a session, as a real adapter takes
# a while (Claude Code: 0.4 to 1 s), so a client's leaving at once lands inside the swap.
SETTINGS = {"LIMINAL_SWAP_HIGH_TOKENS": "100000", "LIMINAL_SWAP_TARGET_TOKENS": "20000",
            "LIMINAL_STORE_INDEX": "false", "AGENT_OPEN_SECONDS": "0.5"}
EXCEPTION_NAME = re.compile(r"\b[A-Z]\w*(Error|Exception)\b|Cancelled")


def journal(home: Path) -> list[SwapRecord]:
    return SwapJournal(home / "liminal-home" / "swaps.jsonl").records()


def sent_to_agent(home: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (home / "agent_in.bin").read_bytes().splitlines()]


async def prompt(proxy: ProxyProcess, thread: str, text: str) -> dict[str, object]:
    answer = await proxy.request("session/prompt", {"sessionId": thread, "prompt": [
        {"type": "text", "text": text}]})
    assert answer["result"]["stopReason"] == "end_turn", answer
    return answer


async def acpx_leaves(proxy: ProxyProcess) -> None:
    """What acpx 0.1.15 does after a prompt's answer: the end of liminal's input at once, SIGTERM
    0.1 s later (its SIGKILL at 1.6 s is left out: the swap here needs about 0.6 s)."""
    await proxy.close_stdin()
    await anyio.sleep(0.1)
    # A liminal with nothing left to do has already left at the end of its input: acpx's
    # kill of a gone process fails quietly as well.
    with contextlib.suppress(ProcessLookupError):
        proxy.process.send_signal(signal.SIGTERM)


async def first_process(home: Path, *prompts: str, **env: str) -> str:
    """A new thread and its ``prompts`` in one liminal, which the client leaves at once after the
    last answer; returns the thread."""
    state: dict[str, str] = {}

    async def body(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1})
        thread = (await proxy.request("session/new", {"cwd": CWD, "mcpServers": []}))["result"]["sessionId"]
        state["thread"] = thread
        for text in prompts:
            await prompt(proxy, thread, text)
        await acpx_leaves(proxy)

    await run_liminal(home, body, **{**SETTINGS, **env})
    return state["thread"]


async def next_process(home: Path, thread: str, text: str) -> None:
    """The thread loaded in a liminal of its own, one prompt, the input closed."""

    async def body(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1})
        loaded = await proxy.request("session/load", {"sessionId": thread, "cwd": CWD, "mcpServers": []})
        assert "result" in loaded, loaded
        await prompt(proxy, thread, text)
        await proxy.close_stdin()

    assert await run_liminal(home, body, **SETTINGS) == 0


def sent(home: Path, *methods: str) -> list[tuple[str, str]]:
    """(method, session) of each request of ``methods`` the agent was sent, in order."""
    return [(str(m["method"]), m["params"]["sessionId"]) for m in sent_to_agent(home)  # type: ignore[index]
            if m.get("method") in methods]


async def test_a_swap_decided_at_the_turn_end_a_client_leaves_after_still_commits(tmp_path: Path) -> None:
    thread = await first_process(tmp_path, "first turn used:5000", "the turn that triggers a swap used:130000")
    [swap] = journal(tmp_path)
    assert swap.outcome == "committed", swap  # before: none began, or abandoned ("(CancelledError)")
    assert swap.new_backing_id is not None
    assert session_path(tmp_path / "claude", CWD, swap.new_backing_id).exists()
    await next_process(tmp_path, thread, "the next prompt used:21000")
    # The next process went on from the swapped session, and did not swap again.
    assert sent(tmp_path, "session/prompt")[-1] == ("session/prompt", swap.new_backing_id)
    assert [r.outcome for r in journal(tmp_path)] == ["committed"]


async def test_a_swap_the_grace_cannot_wait_for_is_abandoned_in_words_and_the_next_load_swaps(
        tmp_path: Path) -> None:
    """A resume of 10 s against a grace of 0.3 s: the swap is abandoned when the grace runs out,
    its rewrite removed before the agent is stopped, and journaled with what happened in words.
    The thread, still past its trigger, swaps at its next load, before its first prompt."""
    thread = await first_process(tmp_path, "first turn used:5000", "the turn that triggers a swap used:130000",
                                 AGENT_OPEN_SECONDS="10", LIMINAL_PROXY_STOP_GRACE_SECONDS="0.3")
    [abandoned] = journal(tmp_path)
    assert abandoned.outcome == "abandoned", abandoned
    assert abandoned.reason.startswith("the client closed its connection during the swap, and the swap "
                                       "did not finish within proxy.stop_grace_seconds (0.3 s)"), abandoned
    assert not EXCEPTION_NAME.search(abandoned.reason), abandoned
    folder = session_path(tmp_path / "claude", CWD, thread).parent
    assert {p.stem for p in folder.glob("*.jsonl")} == {thread}  # no rewrite left
    await next_process(tmp_path, thread, "the next prompt used:21000")
    abandoned_again, swap = journal(tmp_path)
    assert abandoned_again == abandoned
    assert swap.outcome == "committed" and "when the thread was loaded" in swap.reason, swap
    # The load went to the session the thread was on; the prompt waited for the swap and went
    # to the new one.
    assert sent(tmp_path, "session/load", "session/prompt")[-2:] == [
        ("session/load", thread), ("session/prompt", swap.new_backing_id)]


async def test_a_thread_loaded_under_its_trigger_is_not_swapped(tmp_path: Path) -> None:
    thread = await first_process(tmp_path, "first turn used:5000")
    await next_process(tmp_path, thread, "the next prompt used:6000")
    assert journal(tmp_path) == []
    assert sent(tmp_path, "session/prompt")[-1] == ("session/prompt", thread)
