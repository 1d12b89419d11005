"""Summaries by the agent's own model, in a side session of liminal's (issue 24), with the real
Claude Code and Codex against the fake model servers.

A scripted conversation with a low trigger runs through ``liminal acp``. When a swap is coming,
liminal asks the agent for a summary of the turns a swap would consolidate, in a session of its
own: the fake model first tries a tool (refused), then answers with a scripted summary. The
request must reach the model server; no frame of the side session may reach the client; no file
of it may be left in the CLI's folders, the project or liminal's home, nor the session in
``session/list``; the next swap's preamble (what the model is sent after it) must hold the
summary and its state anchor; every range must be summarised once. A second test holds the
summary's answer back: swaps go on with the extractive preamble and no prompt waits for it.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anyio
import pytest

from fixtures.harness import SUMMARIES_ON, AcpClient, Adapter, Reply, Rig, Scenario, Shell, Text
from fixtures.harness.httpserver import RecordedRequest
from fixtures.harness.script import SUMMARY_REQUEST, ModelRequest
from liminal.gradient.summarize import ANCHOR_REQUEST, FOLD_REQUEST, PREAMBLE_INTRO, STATE_HEADING
from liminal.kernel.journal import SwapJournal
from liminal.store.records import SUMMARY_THREAD
from tests.acceptance.conftest import adapter_fixture
from tests.support.codex_state import complaints, rows_of, threads_in
from tests.support.listing import LISTING
from tests.support.mongo import recorded

adapter = adapter_fixture(["claude-agent", "claude-zed", "codex-agent", "codex-zed"])

KINDS = ["plain question", "BASH list", "PAR count", "BIG read", "plain follow-up"]
TITLE_REQUEST = "Your task is to generate a very short title"  # Codex 0.166's, for each session
PROMPTS = [f"turn {n}: {KINDS[n % len(KINDS)]} please" for n in range(18)]
MORE = [f"turn {n}: {KINDS[n % len(KINDS)]} please" for n in range(18, 48)]
SUMMARY = ("## STATE\nGoal: SUMMARY-GOAL keep the listing stable\nEditing: nothing yet\n"
           "## SUMMARY\nSUMMARY-MARK: the model found the listing and the counts agree.")


def scenario(rig: Rig, adapter: Adapter, *, summary: Any = SUMMARY) -> Scenario:
    tried = rig.home.project / "side-session-ran-a-tool.txt"
    shell = Shell(f"touch {tried}", "Try a tool", escalate=adapter.name == "codex-agent")

    def first(request: ModelRequest) -> Any:
        # Codex ends a turn whose tool was refused, and liminal asks once more: then the summary.
        return summary if b"side-session-ran-a-tool" in request.raw else shell

    return (
        Scenario()
        .summarise(first, summary)
        .add("BASH", Shell(LISTING, "List"), "listed them")
        .add("PAR", Reply((Text("Three at once."), Shell("seq 1 40", "a"), Shell("seq 1 60", "b"),
                           Shell("seq 1 80", "c"))), "counted all three")
        .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
    )


def configure(rig: Rig) -> None:
    base = rig.overhead()
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    with (rig.home.liminal_home / "config.toml").open("a") as config:
        config.write(
            f"[swap]\nhigh_tokens = {base + 9_000}\n"
            # Turns take milliseconds here: the summary is asked from half the trigger on, not
            # two turns before it, or the swap would come before the side session has answered.
            "hold_timeout_seconds = 60\nsummary_at = 0.5\nsummary_turns_ahead = 50\n"
            "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n")


def liminal_client(rig: Rig) -> AcpClient:
    n = len(rig.clients)
    # The model's summaries, off in the rig unless asked for (fixtures/harness, SUMMARIES_OFF).
    client = AcpClient(rig.home.liminal_argv(), {**rig.home.env(), **SUMMARIES_ON}, rig.home.project,
                       rig.home.logs / f"stderr-{n}-liminal.log")
    rig.clients.append(client)
    return client


def model_requests(rig: Rig) -> list[RecordedRequest]:
    with rig.server._lock:
        return [r for r in rig.server.requests if r.route.endswith(("/v1/messages", "/responses"))]


def summary_requests(rig: Rig) -> list[RecordedRequest]:
    """The side sessions' requests (not Codex's request for a title of one, which quotes it)."""
    return [r for r in model_requests(rig) if SUMMARY_REQUEST.encode() in r.raw
            and not view(r).last_user_text.startswith(TITLE_REQUEST)]


def main_requests(rig: Rig) -> list[RecordedRequest]:
    return [r for r in model_requests(rig) if (r.json or {}).get("tools")
            and SUMMARY_REQUEST.encode() not in r.raw]


def stored(rig: Rig) -> list[Any]:
    async def read() -> list[Any]:
        async with recorded(rig.home.liminal_home) as store:
            return list(await store.messages(SUMMARY_THREAD, "summary"))
    return anyio.run(read)


def view(request: RecordedRequest) -> ModelRequest:
    from fixtures.harness import anthropic, openai

    parse = anthropic.model_request if request.route.endswith("/v1/messages") else openai.model_request
    return parse(request.path, request.json or {}, request.raw)


def refusals(rig: Rig) -> list[ModelRequest]:
    """The side sessions' requests after the tool the model tried (refused): each session's
    second request (Claude Code: the tool's error result; Codex: liminal's second prompt)."""
    return [v for v in map(view, summary_requests(rig)) if b"side-session-ran-a-tool" in v.raw]


def side_sessions_done(rig: Rig) -> None:
    """Until no side session of liminal's is under way (each works in a folder of its own)."""
    deadline = time.monotonic() + 120
    while list((rig.home.liminal_home / "side").glob("*")):
        assert time.monotonic() < deadline, rig.stderr_tail()
        time.sleep(0.1)


def summarised(rig: Rig) -> bool:
    """A model request after a swap has held the model's summary."""
    return any(b"SUMMARY-MARK" in r.raw for r in main_requests(rig))


def session_ids_on_disk(rig: Rig) -> set[str]:
    claude = {p.stem for p in rig.home.claude_config.glob("projects/*/*.jsonl")}
    codex = {p.stem[-36:] for p in rig.home.codex_home.glob("sessions/*/*/*/rollout-*.jsonl")}
    return claude | codex


def asked_turns(raw: bytes) -> list[str]:
    """The prompts a summary request quotes (``User: ...`` lines of liminal's request)."""
    text = raw.decode()
    return [p for p in PROMPTS + MORE if f"User: {p}" in text]


def test_a_side_session_summarises_the_oldest_turns_for_the_next_swap(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario(rig, adapter)
    configure(rig)
    before = session_ids_on_disk(rig)  # the measuring session of ``rig.overhead``
    client = liminal_client(rig)
    with client:
        initialized = client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for text in PROMPTS + MORE:
            # A person slower than the side session, as one is: Claude Code 2.1.44's runs in a
            # process of its own, seconds to start, and a turn here takes a fraction of one (a
            # summary later than its swap: test_a_swap_does_not_wait_for_a_summary_not_ready).
            side_sessions_done(rig)
            result = client.prompt(thread, text, timeout=180)
            assert result.stop_reason == "end_turn", rig.stderr_tail()
            # On past the 18 turns until a preamble holds the model's summary: a summary is used
            # by the swap that consolidates its whole range, which may be the cycle's second.
            if text in MORE and summarised(rig):
                break
        assert client.prompt(thread, "one turn more please", timeout=180).stop_reason == "end_turn"
        lists = "list" in ((initialized.get("agentCapabilities") or {}).get("sessionCapabilities") or {})
        listing = client.request("session/list", {})["sessions"]
    swaps = [s for s in SwapJournal(rig.home.liminal_home / "swaps.jsonl").records() if s.outcome == "committed"]
    assert swaps, rig.stderr_tail()

    # The summary request reached the model server: the oldest turns, as text, and no tools asked.
    asked = summary_requests(rig)
    assert asked, rig.stderr_tail()
    # Each side session: liminal's prompt, the tool the model tried, refused (Claude Code offers
    # none there; Codex asks and the router says no), then its summary.
    sessions = refusals(rig)
    # (Codex's answer to a call it does not offer there is "unsupported call", not an error.)
    assert sessions and all(v.tool_results[-1].is_error for v in sessions if v.api == "anthropic")
    assert not (rig.home.project / "side-session-ran-a-tool.txt").exists()
    # codex-agent reads the side folder's project config: Codex offers the model one tool of its
    # ten there (apply_patch comes from the model's catalog; an edit needs an approval, refused).
    offered = {t.get("name") or t.get("type") for r in asked for t in (r.json or {}).get("tools") or []}
    assert offered <= {"apply_patch"} or adapter.name != "codex-agent", offered
    # Each range once: no turn is quoted by two side sessions.
    quoted = [p for v in sessions for p in set(asked_turns(v.raw))]
    assert quoted and len(quoted) == len(set(quoted)), quoted
    assert 1 <= len(stored(rig)) <= len(sessions)

    # Nothing of the side session reached the client.
    everything = b"\n".join(f.raw for f in client.received)
    assert b"SUMMARY-MARK" not in everything and b"SUMMARY-GOAL" not in everything
    assert client.session_ids() == {thread}, [f.raw[:400] for f in client.received
                                              if (client.session_ids() - {thread}).pop().encode() in f.raw]
    # No file of it is left: not in the CLI's folders, not in liminal's home, not listed.
    known = before | {thread} | {s.new_backing_id for s in swaps}
    assert session_ids_on_disk(rig) <= known, session_ids_on_disk(rig) - known
    assert not [p for p in (rig.home.liminal_home / "side").glob("*")]
    assert not list(rig.home.claude_config.glob("projects/*-liminal-side-*"))
    listed = [s["sessionId"] for s in listing]
    assert (thread in listed and set(listed) <= before | {thread}) or not lists, listed
    # Nor a row of Codex's databases, and Codex found nothing stale: a row naming a rollout
    # liminal removed is what it logs as "state db returned stale rollout path", and holds the
    # request's text. No title of a side session is asked for (codex-acp 2.6 titles a session
    # from its first prompt's text blocks, in a model request of its own, then names the thread).
    side_ids = {str((r.json or {}).get("prompt_cache_key")) for r in summary_requests(rig)} - {"None"}
    assert side_ids or adapter.model_api == "anthropic"
    assert threads_in(rig.home.codex_home, rig.home.liminal_home / "side") == []
    assert {i: rows_of(rig.home.codex_home, i) for i in side_ids} == dict.fromkeys(side_ids, 0)
    assert complaints(rig.home.codex_home, rig.home.logs) == []
    titled = [r for r in model_requests(rig) if SUMMARY_REQUEST.encode() in r.raw
              and view(r).last_user_text.startswith(TITLE_REQUEST)]
    assert titled == []

    # The swap after the summary: what the model is sent holds the summary and the state anchor.
    made = stored(rig)[0].time
    after = [s for s in swaps if s.started_at > made]
    assert after, (made, swaps)
    holding = [r for r in main_requests(rig) if r.t > made and b"SUMMARY-MARK" in r.raw]
    assert holding, rig.stderr_tail()
    assert STATE_HEADING.encode() in holding[0].raw and b"SUMMARY-GOAL" in holding[0].raw
    assert PREAMBLE_INTRO[:40].encode() in holding[0].raw
    assert b"SUMMARY-MARK" in main_requests(rig)[-1].raw  # and in every later preamble
    assert not rig.server.errors


# Claude Code only: what the swap does without a summary is the CLI-neutral gradient's.
@pytest.mark.parametrize("adapter", ["claude-agent"], indirect=True)
def test_a_swap_does_not_wait_for_a_summary_not_ready(adapter: Adapter, rig: Rig) -> None:
    released = threading.Event()
    held: list[RecordedRequest] = []

    def late(request: RecordedRequest) -> None:
        if SUMMARY_REQUEST.encode() in request.raw:
            held.append(request)
            released.wait(300)  # the model takes its time; the person's turns must not

    rig.server.script = scenario(rig, adapter)
    rig.server.before_serving = late
    configure(rig)
    before = session_ids_on_disk(rig)
    client = liminal_client(rig)
    try:
        with client:
            client.initialize()
            thread = client.new_session(rig.home.project)["sessionId"]
            for text in PROMPTS:
                result = client.prompt(thread, text, timeout=180)
                assert result.stop_reason == "end_turn", rig.stderr_tail()
            swaps = [s for s in SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
                     if s.outcome == "committed"]
            assert swaps and held, rig.stderr_tail()  # asked, not answered, and swapped all the same
            # Every swap so far had only the extractive preamble: the summary never came.
            last = main_requests(rig)[-1].raw
            assert PREAMBLE_INTRO[:40].encode() in last and b"SUMMARY-MARK" not in last
            assert STATE_HEADING.encode() not in last
            released.set()
    finally:
        released.set()
    assert session_ids_on_disk(rig) <= before | {thread} | {s.new_backing_id for s in swaps}
    assert not list(rig.home.claude_config.glob("projects/*-liminal-side-*"))


def side_model(request: ModelRequest) -> str:
    """The model in liminal's side sessions, for the rebuild and fold test: a range's summary
    names its first turn (about 200 characters, and no state of its own, so the rebuilt anchor
    stays the newest), a fold says it is one, the rebuild's state says so."""
    text = request.raw.decode()
    if ANCHOR_REQUEST in text:
        return "## STATE\nGoal: REBUILT-GOAL"
    if FOLD_REQUEST in text:
        return f"## SUMMARY\nFOLD-MARK: {text.count('--- part')} earlier summaries folded in one."
    first = min((n for n, p in enumerate(PROMPTS) if f"User: {p}" in text), default=-1)
    return f"SUMMARY-MARK-{first}: the model found the listing; " + "the counts agree. " * 8


def committed(rig: Rig) -> list[Any]:
    return [s for s in SwapJournal(rig.home.liminal_home / "swaps.jsonl").records() if s.outcome == "committed"]


# One adapter: the rebuild and the fold are the kernel's, the side session the one above. Codex's
# (codex-agent) answers in 0.3-0.5 s where Claude Code's takes 5-9 s: more summaries, sooner.
@pytest.mark.parametrize("adapter", ["codex-agent"], indirect=True)
def test_context_rebuild_and_a_fold_of_the_oldest_summaries(adapter: Adapter, rig: Rig) -> None:
    """The range summaries (200 characters each) pass 0.8 of the 1,566 characters a 600-token
    preamble leaves them: the oldest are folded into one, which later preambles hold in their
    place, so none gives way. /context rebuild has the state anchor written now; /context shows
    it and the next swap's preamble starts with it."""
    rig.server.script = (
        Scenario().summarise(side_model)
        .add("BASH", Shell(LISTING, "List"), "listed them")
        .add("PAR", Reply((Text("Three at once."), Shell("seq 1 40", "a"), Shell("seq 1 60", "b"),
                           Shell("seq 1 80", "c"))), "counted all three")
        .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
    )
    configure(rig)
    client = liminal_client(rig)
    with client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        prompts = iter(PROMPTS + [f"more {n}: {KINDS[n % len(KINDS)]} please" for n in range(80)])
        # Until the first fold is asked for (seven summaries, one per swap cycle; how many turns
        # that takes depends on how fast the side sessions answer), and one turn more.
        while not [r for r in summary_requests(rig) if FOLD_REQUEST.encode() in r.raw]:
            assert client.prompt(thread, next(prompts), timeout=180).stop_reason == "end_turn", rig.stderr_tail()
        client.prompt(thread, next(prompts), timeout=180)
        rebuilt = client.prompt(thread, "/context rebuild", timeout=240)
        context = client.prompt(thread, "/context", timeout=60)
        asked_at = min(r.t for r in summary_requests(rig) if ANCHOR_REQUEST.encode() in r.raw)
        while not [s for s in committed(rig) if s.started_at > asked_at]:  # on to the next swap
            assert client.prompt(thread, next(prompts), timeout=180).stop_reason == "end_turn"
    assert rebuilt.stop_reason == "end_turn" and rebuilt.text.startswith(
        "State anchor written again from the current context"), rebuilt.text
    assert "Goal: REBUILT-GOAL" in rebuilt.text and "Goal: REBUILT-GOAL" in context.text, context.text
    # Asked over the whole context now: the latest turn too, which no swap consolidates.
    anchor_requests = [r for r in summary_requests(rig) if ANCHOR_REQUEST.encode() in r.raw]
    last = [r for r in main_requests(rig) if r.t < asked_at][-1]
    assert view(last).last_user_text.encode() in anchor_requests[0].raw

    folds = [m for m in stored(rig) if m.data.get("parts")]
    assert folds and len({m.data["content_hash"] for m in folds}) == len(folds)  # each stored once
    asked_folds = [r for r in summary_requests(rig) if FOLD_REQUEST.encode() in r.raw]
    assert b"SUMMARY-MARK-0:" in asked_folds[0].raw  # the oldest range first
    after = [s for s in committed(rig) if s.started_at > asked_at]
    preamble = next(r for r in main_requests(rig) if r.t > after[0].started_at).raw
    assert json.dumps(f"{STATE_HEADING}\nGoal: REBUILT-GOAL")[1:-1].encode() in preamble  # its top
    assert b"FOLD-MARK" in preamble and b"SUMMARY-MARK-0:" not in preamble
    assert b"earlier summaries left out" not in preamble
    assert not rig.server.errors
