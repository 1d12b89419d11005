"""The real CLIs through ``liminal acp`` when the model API fails as the real one does, and with
its prompt cache as the real one keeps it (``FakeServer.fail``, ``Rig.advance_clock``).

- Claude Code (claude-agent) meets a 529 ``overloaded_error``, a stream cut mid-answer and an
  ``overloaded_error`` event mid-stream, one per turn: it retries each (after about a second for
  the 529; it asks again without streaming after the error event), every turn is answered once,
  and the store holds what the client was sent, every tool call with its output.
- Codex (codex-agent, its provider allowed one retry: the rig's allows none) meets a 500, a cut
  and a ``response.failed``: the same; and its requests after the first read the prompt cache
  (``cached_tokens``), which liminal's meter and the store's records read as part of the
  context, not instead of it.
- Gemini CLI meets a 429 (a per-minute quota, retry in a second), a 500 and a 503, one per turn,
  and retries each; a stream cut after its first chunk it does not retry (the prompt's answer is
  its error): the store holds what the client was sent, every tool call with its output.
- An idle swap on a cold cache (claude-agent): turns grow the thread, then the fake's clock and
  liminal's (``clock.offset``) move past the 5-minute cache, turn after turn, until liminal's
  idle look swaps; the prompt after it reads nothing from the cache, as the real API would
  answer it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from fixtures.harness import (
    OVERLOADED,
    SERVER_ERROR,
    AcpClient,
    AcpError,
    Fault,
    Rig,
    Scenario,
    Shell,
    Text,
    cut,
)
from fixtures.harness.anthropic import tokens
from liminal.config import GradientSettings
from liminal.harness.codex.live import CodexSessions
from liminal.kernel.journal import SwapJournal
from tests.support.mongo import recorded

IDLE_LOOK = "thread idle past the cache's life"


def scenario(turns: int, command: str = "echo zebra-$((40+{n}+2))") -> Scenario:
    """Turn ``RUN<n>``: a word and a shell call whose output (not its command) says
    ``zebra-<42+n>`` (``command`` formatted with ``n`` and ``m = 42 + n``), then the answer."""
    script = Scenario()
    for n in range(turns):
        script.add(f"RUN{n} ", [Text("let me look first"), Shell(command.format(n=n, m=42 + n))],
                   f"the tool said zebra-{42 + n}")
    return script


def stored(rig: Rig, thread: str) -> tuple[list[Any], list[Any]]:
    """The thread's (agent messages, tool calls) in the store liminal recorded into."""
    async def read() -> tuple[list[Any], list[Any]]:
        async with recorded(rig.home.liminal_home) as store:
            [summary] = await store.threads()
            assert summary.thread.id == thread
            messages = [m for m in await store.messages(thread) if not m.replayed]
            return ([m for m in messages if m.kind == "agent"],
                    [m for m in messages if m.kind == "tool_call"])
    return anyio.run(read)


def turns_through(rig: Rig, faults: list[Fault]) -> tuple[AcpClient, str, list[str]]:
    """One turn per fault (the fault on its first model call), then one without: each answered
    once, its tool run; (the client, its thread, the answers' texts)."""
    rig.server.script = scenario(len(faults) + 1)
    texts = []
    client = rig.client(via_liminal=True)
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n, fault in enumerate([*faults, None]):
            if fault is not None:
                rig.server.fail(fault)
            result = client.prompt(thread, f"RUN{n} please", timeout=180)
            assert result.stop_reason == "end_turn", rig.stderr_tail()
            # The whole answer of the retry ends it (what came before it of a cut answer is
            # the CLI's to show or not, and a race: below).
            assert result.text.endswith(f"let me look firstthe tool said zebra-{42 + n}"), result.text
            texts.append(result.text)
        client.settle()
    # Each fault was met once, and the request after it answered.
    assert [r.fault for r in rig.server.faulted] == faults, [(r.status, r.fault) for r in rig.server.requests]
    agent, tools = stored(rig, thread)
    # Nothing lost, nothing twice: the store's agent text is what the client was sent, and
    # every tool ran once, to completion.
    assert "".join(m.text for m in agent) == "".join(texts), ([m.text for m in agent], texts)
    assert [t.status for t in tools] == ["completed"] * len(texts), tools
    # ... and the model was sent each tool's output once the retry answered.
    results = [v.tool_results[-1].text for v in rig.server.views() if v.tool_results]
    assert [f"zebra-{42 + n}" in out for n, out in enumerate(results)] == [True] * len(texts), results
    return client, thread, texts


def test_claude_code_retries_an_overload_and_a_cut_stream(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig("claude-agent")
    _, _, texts = turns_through(rig, [OVERLOADED, cut(after=4), Fault(status=529, after=4)])
    # A 529 comes before any of the answer, and the last turn met no fault: each answer once.
    # (Of a cut answer Claude Code showed nothing in most runs; after the error event the
    # adapter sends the rest of the text it had begun. Neither is liminal's to decide.)
    assert [texts[0], texts[3]] == ["let me look firstthe tool said zebra-42",
                                    "let me look firstthe tool said zebra-45"], texts


def sent(client: AcpClient, thread: str) -> str:
    """The agent text the client was sent for ``thread``, in order."""
    return "".join(f.msg["params"]["update"]["content"].get("text", "") for f in client.received
                   if f.method == "session/update" and f.msg["params"].get("sessionId") == thread
                   and f.msg["params"]["update"].get("sessionUpdate") == "agent_message_chunk")


def test_gemini_cli_retries_a_rate_limit_and_server_errors_and_fails_a_cut_turn(
        make_rig: Callable[..., Rig]) -> None:
    """A 429 (a per-minute quota, retry in a second), a 500 and a 503 are retried; a stream cut
    after its first chunk is not (Gemini CLI 0.61.0 answers the prompt with its error,
    "terminated"), and the thread goes on. Either way the store holds what the client was sent."""
    rig = make_rig("gemini")
    faults = [Fault(status=429), SERVER_ERROR, Fault(status=503), cut(after=1), None]
    # (Gemini CLI refuses a command with ``$(...)`` in it: "Command injection detected".)
    rig.server.script = scenario(len(faults), "printf 'zebra-%d' {m}")
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n, fault in enumerate(faults):
            if fault is not None:
                rig.server.fail(fault)
            if fault is not None and fault.after is not None:
                with pytest.raises(AcpError, match="terminated"):
                    client.prompt(thread, f"RUN{n} please", timeout=180)
                continue
            result = client.prompt(thread, f"RUN{n} please", timeout=180)
            assert result.stop_reason == "end_turn", rig.stderr_tail()
            assert result.text == f"let me look firstthe tool said zebra-{42 + n}", result.text
        client.settle()
    assert [r.fault for r in rig.server.faulted] == faults[:-1]
    assert not rig.server.errors  # each retry a request the API takes
    agent, tools = stored(rig, thread)
    shown = sent(client, thread)
    assert "".join(m.text for m in agent) == shown and shown.count("let me l") == len(faults), shown
    assert [t.status for t in tools] == ["completed"] * (len(faults) - 1), tools
    results = [v.tool_results[-1].text for v in rig.server.views() if v.tool_results]
    assert [f"zebra-{42 + n}" in out for n, out in zip([0, 1, 2, 4], results, strict=True)] == [True] * 4, results


def allow_one_retry(rig: Rig) -> None:
    config = rig.home.codex_home / "config.toml"
    text = config.read_text()
    for setting in ("request_max_retries", "stream_max_retries"):
        assert f"{setting} = 0" in text
        text = text.replace(f"{setting} = 0", f"{setting} = 1")
    config.write_text(text)


def test_codex_retries_a_server_error_and_a_cut_stream_and_its_cache_is_metered(
        make_rig: Callable[..., Rig]) -> None:
    rig = make_rig("codex-agent")
    allow_one_retry(rig)
    client, thread, texts = turns_through(rig, [SERVER_ERROR, cut(after=4), Fault(status=500, after=4)])
    assert [texts[0], texts[3]] == ["let me look firstthe tool said zebra-42",
                                    "let me look firstthe tool said zebra-45"], texts
    # The prompt cache: every agent-loop request after the first shares the instructions, the
    # tools and the conversation so far with the one before it.
    answered = [r for r in rig.server.responses_requests() if r.status == 200 and r.fault is None]
    cached = [r.usage["input_tokens_details"]["cached_tokens"] for r in answered]
    assert cached[0] == 0 and all(c > 0 for c in cached[1:]), cached
    last = answered[-1].usage
    assert 0 < last["input_tokens_details"]["cached_tokens"] < last["input_tokens"]
    # liminal's meter (the usage points it recorded from the adapter) and its reading of the
    # rollout (what its swaps decide by) count the whole prompt, the cached part in it.
    usage = [f.msg["params"]["update"] for f in client.received if f.msg.get("method") == "session/update"
             and f.msg["params"]["update"].get("sessionUpdate") == "usage_update"]
    assert usage and usage[-1]["used"] == last["total_tokens"], (usage[-1], last)
    sessions = CodexSessions(GradientSettings(), {"CODEX_HOME": str(rig.home.codex_home)})
    path = sessions.locate(thread, str(rig.home.project))
    assert path is not None
    assert sessions.context_tokens(path) == last["total_tokens"]

    async def records() -> list[Any]:
        async with recorded(rig.home.liminal_home) as store:
            return [r.usage for r in await store.session_records(thread) if r.usage]
    assert records, "no usage in the store's records of the rollout"
    [*_, newest] = anyio.run(records)
    assert newest["cached_input_tokens"] == last["input_tokens_details"]["cached_tokens"]
    assert newest["input_tokens"] == last["input_tokens"]


def logged(log: Path, event: str) -> list[dict[str, Any]]:
    """The lines of liminal's (debug) log whose event begins with ``event``."""
    if not log.is_file():
        return []
    lines = [json.loads(line) for line in log.read_text(errors="replace").splitlines()
             if line.startswith("{") and event in line]
    return [line for line in lines if str(line.get("event", "")).startswith(event)]


def until(condition: Callable[[], bool], timeout: float = 120) -> None:
    """Wait for something liminal writes to a file (no frame tells it)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not in {timeout}s")
        time.sleep(0.05)


def test_an_idle_thread_on_a_cold_cache_is_swapped(make_rig: Callable[..., Rig]) -> None:
    """Each turn, then six minutes: the fake's cache is gone (its next request reads none of
    it), liminal looks at the spell; once the context is worth a swap, it swaps."""
    # Turns of about 7k (a 24 KB output, under Claude Code's 30,000 characters), a recent band
    # of 5k: the idle swap is worth it after a few turns.
    rig = make_rig("claude-agent", Scenario().add("BIG", Shell("seq 10000 14000", "Read a lot"), "read it"))
    client = rig.client(via_liminal=True, env={**rig.clock_env(), "LIMINAL_LOG_LEVEL": "debug",
                                               "LIMINAL_GRADIENT_RECENT_TOKENS": "5000"})
    log = rig.home.logs / "stderr-0-liminal.log"
    journal = SwapJournal(rig.home.liminal_home / "swaps.jsonl")
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n in range(30):
            result = client.prompt(thread, f"turn {n}: BIG read please", timeout=180)
            assert result.stop_reason == "end_turn", rig.stderr_tail()
            if n:  # the spell before this turn outlived the cache: the fake answered it cold
                first = next(r for r in rig.server.messages_requests() if r.json["messages"][-1]["role"] == "user"
                         and f"turn {n}: BIG" in str(r.json["messages"][-1]["content"]))
                assert first.usage["cache_read_input_tokens"] == 0, first.usage
            # The spell begins when liminal has seen the turn end (its answer reached the
            # client first), and ends with liminal's one look at it.
            until(lambda n=n: len(logged(log, "turn ended")) > n)
            rig.advance_clock(6 * 60)
            until(lambda n=n: len(logged(log, IDLE_LOOK)) > n)
            if logged(log, IDLE_LOOK)[-1]["decided"]:
                break
        else:
            pytest.fail(f"no idle swap in 30 turns: {logged(log, IDLE_LOOK)[-3:]}")
        until(lambda: any(r.outcome == "committed" for r in journal.records()))
        after = client.prompt(thread, "after the swap", timeout=180)
        assert after.stop_reason == "end_turn", rig.stderr_tail()
        client.settle()
    [swap] = journal.records()
    assert swap.outcome == "committed" and "idle past the cache's life (300s)" in swap.reason, swap
    assert swap.cost is not None and swap.cost["idle"] is True and swap.cost["cache_life"] == 300.0
    assert swap.tokens_after is not None and swap.tokens_before is not None
    assert swap.tokens_after < swap.tokens_before
    # The prompt after the swap: on the rewritten session, nothing of it read from the cache
    # (the spell outlived it), all of it written again, and smaller than before.
    last = rig.server.messages_requests()[-1]
    assert "after the swap" in str(last.json["messages"][-1]["content"])
    assert last.usage["cache_read_input_tokens"] == 0 < last.usage["cache_creation_input_tokens"]
    assert tokens(len(last.raw)) < swap.tokens_before
