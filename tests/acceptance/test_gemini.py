"""The real Gemini CLI (``gemini --acp``: it speaks ACP itself) against the fake Gemini API: through
``liminal acp`` every turn answered, a tool call run, the conversation and the session file's
lines in liminal's store; the CLI's own session file where and as docs/formats.md says; its
faults with ``session/load`` (docs/facts.md); the harness's rewrite loaded by the CLI, swaps and
the cutting commands through ``liminal acp``. Not in the adapter matrix the other acceptance
tests run over (``matrix = false`` in pins.toml): those have not been run with it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from fixtures.harness import AcpClient, AcpError, Frame, Rig, Scenario, Text, ToolCall, adapters
from tests.support.mongo import recorded

NOTES = "the notes say: zebra-42\n"


def scenario(project: Path) -> Scenario:
    return Scenario().add("READ_NOTES", ToolCall("read_file", {"file_path": str(project / "notes.txt")}),
                          Text("the file says zebra-42"))


def chats(rig: Rig) -> list[Path]:
    """Gemini CLI's session files: ``~/.gemini/tmp/<project>/chats/session-*.jsonl``."""
    return sorted((rig.home.gemini_dir / "tmp").glob("*/chats/session-*.jsonl"))


def session_file(rig: Rig, session: str) -> Path:
    """The file holding the session's conversation. (A session's start writes two headers some
    milliseconds apart; should a minute turn between them, the first is a file of its own.)"""
    return max((p for p in chats(rig) if p.stem.endswith(session[:8])), key=lambda p: p.stat().st_size)


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def gemini(make_rig: Callable[..., Rig]) -> Rig:
    rig = make_rig("gemini")
    (rig.home.project / "notes.txt").write_text(NOTES)
    rig.server.script = scenario(rig.home.project)
    return rig


def test_gemini_through_liminal_answers_every_turn_and_is_stored(gemini: Rig) -> None:
    rig = gemini
    with rig.client(via_liminal=True) as client:
        init = client.initialize()
        session = client.new_session(rig.home.project)["sessionId"]
        tool_turn = client.prompt(session, "READ_NOTES please", timeout=180)
        text_turn = client.prompt(session, "hello", timeout=180)
        client.settle()
    assert init["agentInfo"]["name"] == "gemini-cli"
    assert init["agentInfo"]["version"] == adapters()["gemini"].version
    assert init["agentCapabilities"]["loadSession"] is True

    assert tool_turn.stop_reason == "end_turn", rig.stderr_tail()
    assert {"tool_call", "tool_call_update"} <= set(tool_turn.kinds())
    assert tool_turn.text.endswith("the file says zebra-42")
    assert text_turn.stop_reason == "end_turn"
    assert text_turn.text.startswith("pong (n=")

    # The model got the file through the CLI's function response, answering the fake's call id.
    views = rig.server.views()
    answered = [v for v in views if v.tool_results]
    assert answered and "zebra-42" in answered[0].tool_results[0].text
    assert answered[0].tool_results[0].call_id.startswith("call_fake")
    assert not rig.server.errors

    async def check() -> None:
        async with recorded(rig.home.liminal_home) as store:
            [summary] = await store.threads()
            assert summary.thread.id == session and summary.turns == 2
            messages = await store.messages(session)
            assert any(m.kind == "agent" and "zebra-42" in m.text for m in messages)
            assert any(m.kind == "agent" and "pong" in m.text for m in messages)
            assert [m for m in messages if m.kind == "tool_call"]
            # The CLI's session file, line by line, as Gemini's harness reads it: the prompts,
            # the call with its result, the model's answers and their usage.
            lines = await store.session_records(session)
            types = [r.type for r in lines]
            assert types.count("gemini:user") == 2 and types.count("gemini:model:calls") == 1
            [call] = [r for r in lines if r.type == "gemini:model:calls"]
            assert "zebra-42" in call.text and call.tool_ids == ("read_file__call_fake00000000000000000001",)
            assert any(r.usage and r.usage.get("input") for r in lines)
            assert b"".join(r.raw + b"\n" for r in lines) == session_file(rig, session).read_bytes()

    anyio.run(check)

    # The CLI's session file: named by the minute it began and the session id's first eight
    # characters, a JSON line per record (docs/formats.md): the model's call turn is two
    # records (its usage, then its tool calls with their results), the response a user record.
    lines = records(session_file(rig, session))
    assert lines[0]["sessionId"] == session and lines[0]["kind"] == "main"
    said = [r for r in lines if "type" in r]
    assert [m["type"] for m in said] == ["user", "gemini", "gemini", "user", "gemini", "user", "gemini"]
    [call] = [c for m in said for c in m.get("toolCalls", [])]  # type: ignore[attr-defined]
    assert call["name"] == "read_file" and call["status"] == "success"
    assert call["id"] == "read_file__call_fake00000000000000000001"
    assert "zebra-42" in json.dumps(said[3]["content"])
    assert [m["content"] for m in said if m["type"] == "gemini" and "tokens" in m][-2:] == [
        "the file says zebra-42", text_turn.text]


def began_a_minute_ago(rig: Rig, session: str) -> None:
    """Name the session's file as if the session began in an earlier minute.

    Gemini CLI 0.61.0 names a session's file by the minute it began and the id's first eight
    characters, and ``session/load`` starts a new recording of that id before it reads: in the
    minute the session began, that recording is the same file, its ``$set`` of the messages
    leaves only the context, and the load answers "No previous sessions found for this
    project." (docs/facts.md). A person loads a session later than that; the test must too.
    """
    path = session_file(rig, session)
    path.rename(path.with_name(f"session-2000-01-01T00-00-{session[:8]}.jsonl"))


def updates_since(frames: list[Frame], start: int, session: str) -> list[str]:
    return [f.msg["params"]["update"]["sessionUpdate"] for f in frames[start:]
            if f.method == "session/update" and f.msg["params"].get("sessionId") == session]


def one_turn(rig: Rig, prompt: str, *, via_liminal: bool = False) -> str:
    """A new session in a process of its own, one prompt answered; its id."""
    with rig.client(via_liminal=via_liminal) as client:
        client.initialize()
        session = str(client.new_session(rig.home.project)["sessionId"])
        assert client.prompt(session, prompt, timeout=180).stop_reason == "end_turn", rig.stderr_tail()
        client.settle()
    return session


def load(client: AcpClient, rig: Rig, session: str) -> list[str]:
    """``session/load``, and the updates it replays (they come after its answer)."""
    client.initialize()
    start = len(client.received)
    client.load_session(session, rig.home.project, timeout=120)
    client.settle(quiet=1)
    return updates_since(client.received, start, session)


def test_gemini_loads_its_session_in_a_new_process(gemini: Rig) -> None:
    """``session/load`` (``loadSession: true``): a new process replays the thread's history (after
    its answer: the CLI streams it without waiting) and goes on with it."""
    rig = gemini
    session = one_turn(rig, "hello", via_liminal=True)
    began_a_minute_ago(rig, session)
    with rig.client(via_liminal=True) as client:
        replayed = load(client, rig, session)
        again = client.prompt(session, "hello again", timeout=180)
        client.settle()
    assert replayed.count("user_message_chunk") >= 2, replayed  # the context, then "hello"
    assert "agent_message_chunk" in replayed, replayed
    assert again.stop_reason == "end_turn"
    # The model's request after the load holds the earlier turn.
    last = rig.server.views()[-1]
    assert last.last_user_text == "hello again" and b"pong (n=" in last.raw


def test_gemini_resumes_a_tool_call_with_its_response_twice(gemini: Rig) -> None:
    """A fact of Gemini CLI 0.61.0 (docs/facts.md), so a version that fixes it shows here: a
    session with a tool call, loaded, sends its function response twice (once from the model
    message's ``toolCalls``, once from the user record of the response), which the real API
    refuses; the turn after the load fails."""
    rig = gemini
    rig.server.allow_refusals = True
    session = one_turn(rig, "READ_NOTES please")
    began_a_minute_ago(rig, session)
    with rig.client(via_liminal=False) as client:
        load(client, rig, session)
        with pytest.raises(AcpError, match="number of function response parts"):
            client.prompt(session, "hello again", timeout=180)
    assert [r.error for r in rig.server.errors] == [
        "Please ensure that the number of function response parts is equal to the number of "
        "function call parts of the function call turn."]


def test_the_next_start_deletes_a_loaded_sessions_files(gemini: Rig) -> None:
    """A fact of Gemini CLI 0.61.0 (docs/facts.md), so a version that fixes it shows here: a load
    leaves a file of its own minute holding only the context; the next start's session cleanup
    (``general.sessionRetention``, on by default) deletes every file with nothing to resume and,
    with it, every file whose name ends in the same eight characters of the id: the
    conversation's file too."""
    rig = gemini
    session = one_turn(rig, "hello")
    began_a_minute_ago(rig, session)
    with rig.client(via_liminal=False) as client:
        load(client, rig, session)
    named = [p for p in chats(rig) if p.stem.endswith(session[:8])]
    assert len(named) == 2  # the conversation's, and the load's own holding only the context
    with rig.client(via_liminal=False) as client:
        client.initialize()
        client.new_session(rig.home.project)
        client.settle()
    assert not [p for p in chats(rig) if p.stem.endswith(session[:8])]
    with rig.client(via_liminal=False) as client:
        client.initialize()
        with pytest.raises(AcpError, match=r"No previous sessions found|Invalid session identifier"):
            client.load_session(session, rig.home.project, timeout=120)


def test_a_copy_under_a_new_id_without_the_response_records_loads_and_goes_on(gemini: Rig) -> None:
    """What a rewrite for Gemini CLI 0.61.0 can be (docs/facts.md): the session's lines under a new
    id, in a file named for an earlier minute, without the user records of function responses
    (each is in its model message's ``toolCalls[].result`` already). The CLI loads it, replays
    the tool call, and the next request holds the call with one response; a second load does
    not."""
    rig = gemini
    session = one_turn(rig, "READ_NOTES please")
    source = session_file(rig, session)
    copy = str(uuid.uuid4())
    kept = []
    for line in records(source):
        if line.get("sessionId") == session:
            line = {**line, "sessionId": copy}
        content = line.get("content")
        if line.get("type") == "user" and isinstance(content, list) and any(
                isinstance(part, dict) and "functionResponse" in part for part in content):
            continue
        kept.append(json.dumps(line, separators=(",", ":")) + "\n")
    source.with_name(f"session-2000-01-01T00-00-{copy[:8]}.jsonl").write_text("".join(kept))
    with rig.client(via_liminal=False) as client:
        replayed = load(client, rig, copy)
        again = client.prompt(copy, "hello again", timeout=180)
        client.settle()
    assert "tool_call" in replayed and "agent_message_chunk" in replayed, replayed
    assert again.stop_reason == "end_turn" and not rig.server.errors
    contents = rig.server.views()[-1].body["contents"]
    kinds = [next(iter(part)) for content in contents for part in content["parts"]]
    assert kinds.count("functionCall") == 1 and kinds.count("functionResponse") == 1, kinds
    # For one load only: the resume wrote the whole history back to the file, the responses as
    # user records again (``<message id>_response``), and a second load sends them twice. (The
    # session cleanup is off for it: else this start deletes the file, as the test above shows.)
    rig.server.allow_refusals = True
    settings = json.loads((rig.home.gemini_dir / "settings.json").read_text())
    settings["general"]["sessionRetention"] = {"enabled": False}
    (rig.home.gemini_dir / "settings.json").write_text(json.dumps(settings))
    with rig.client(via_liminal=False) as client:
        load(client, rig, copy)
        with pytest.raises(AcpError, match="number of function response parts"):
            client.prompt(copy, "a third time", timeout=180)


def test_gemini_connects_to_nothing_but_the_fake_server(gemini: Rig, tmp_path: Path) -> None:
    """Every connection the CLI opens, traced: only the fake server's, on loopback. (In the
    loopback-only namespace anything else would fail anyway; the trace shows nothing is tried:
    no name looked up, no telemetry, update check or model listing. With the CLI's default
    settings 0.61.0 looks up names at start: docs/facts.md.)"""
    if shutil.which("strace") is None:
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail("strace is not installed (CI=true: .ci/run installs it)", pytrace=False)
        pytest.skip("strace is not installed")
    rig = gemini
    trace = tmp_path / "connect.trace"
    argv = rig.home.wrap(["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(trace),
                          *rig.adapter.command])
    client = AcpClient(argv, rig.home.env(), rig.home.project, rig.home.logs / "stderr-strace.log")
    rig.clients.append(client)
    with client:
        client.initialize()
        session = client.new_session(rig.home.project)["sessionId"]
        assert client.prompt(session, "READ_NOTES please", timeout=180).stop_reason == "end_turn"
        client.settle()
    calls = [line for line in trace.read_text().splitlines() if "connect(" in line]
    inet = [line for line in calls if "AF_INET" in line]
    assert inet, "the trace saw no connection at all"
    port = f"htons({rig.server.port})"
    assert all('inet_addr("127.0.0.1")' in line and port in line for line in inet), inet



def test_gemini_loads_a_rewrite_liminal_wrote_and_goes_on(gemini: Rig) -> None:
    """The harness's rewrite (``GeminiSessions.rewrite``) of a session of four turns with a tool
    call each, under a new id: the CLI loads it by ``session/load`` in a new process and goes
    on. Its next request holds the last turn whole, an older turn's file cut to a head and a
    recall key of the original session, the oldest turns as a summary in the first content, one
    response per call, and is smaller than the last request before."""
    from liminal.config import GradientSettings
    from liminal.gradient.recall import KEY_IN_MARKER, RecallKey
    from liminal.gradient.summarize import PREAMBLE_INTRO
    from liminal.harness.gemini.live import GeminiSessions

    rig = gemini
    letters = "ABCD"
    script = Scenario()
    for letter in letters:
        (rig.home.project / f"{letter}.txt").write_text(f"file {letter} says line\n" * 400)
        script.add(f"READ_{letter}", ToolCall("read_file", {"file_path": str(rig.home.project / f"{letter}.txt")}),
                   Text(f"read {letter}"))
    rig.server.script = script
    with rig.client(via_liminal=False) as client:
        client.initialize()
        session = str(client.new_session(rig.home.project)["sessionId"])
        for letter in letters:
            assert client.prompt(session, f"READ_{letter} please", timeout=180).stop_reason == "end_turn", \
                rig.stderr_tail()
        client.settle()
    before = rig.server.views()[-1]
    began_a_minute_ago(rig, session)

    sessions = GeminiSessions(GradientSettings(), {"HOME": str(rig.home.home)})
    path = sessions.locate(session, str(rig.home.project))
    assert path is not None
    # A target whose bands keep the last turn whole, cut one and summarise the oldest.
    start = sessions.context_tokens(path) or 0
    target = next((t for t in range(start, 0, -250) if (b := sessions.bands(path, t, 1_000))["middle"]["turns"]
                   and b["ancient"]["turns"]), None)
    assert target is not None, [sessions.bands(path, t, 1_000) for t in range(start, 0, -2_000)]
    new_id = str(uuid.uuid4())
    rewritten = sessions.rewrite(path, target, new_id, recent_tokens=1_000)
    assert rewritten.tokens_after < rewritten.tokens_before

    with rig.client(via_liminal=False) as client:
        replayed = load(client, rig, new_id)
        again = client.prompt(new_id, "hello again", timeout=180)
        client.settle()
    assert "agent_message_chunk" in replayed and "tool_call" in replayed, replayed
    assert again.stop_reason == "end_turn" and not rig.server.errors, rig.stderr_tail()
    after = rig.server.views()[-1]
    contents = after.body["contents"]
    parts = [part for content in contents for part in content["parts"]]
    calls = [p["functionCall"] for p in parts if "functionCall" in p]
    responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
    assert len(calls) == len(responses) >= 2, [next(iter(p)) for p in parts]
    texts = [json.dumps(r["response"]) for r in responses]
    assert json.dumps({"output": "file D says line\n" * 400}) in texts  # the last turn whole
    [cut] = [t for t in texts if KEY_IN_MARKER.search(t)]
    key = RecallKey.parse(KEY_IN_MARKER.search(cut).group(1))  # type: ignore[union-attr]
    assert key.session_id == session and sessions.recall(key) is not None
    assert any(p.get("text", "").startswith(PREAMBLE_INTRO) for p in contents[0]["parts"])
    assert "READ_A please" not in json.dumps(contents[1:])  # the oldest turn only in the summary
    assert len(json.dumps(contents)) < len(json.dumps(before.body["contents"]))


def user_texts(frames: list[Frame], start: int, session: str) -> list[str]:
    """The texts of the user messages a client was sent for ``session`` from ``frames[start]``."""
    return [f.msg["params"]["update"]["content"].get("text", "") for f in frames[start:]
            if f.method == "session/update" and f.msg["params"].get("sessionId") == session
            and f.msg["params"]["update"]["sessionUpdate"] == "user_message_chunk"]


def test_a_gemini_thread_goes_on_across_swaps_commands_and_a_restart(gemini: Rig) -> None:
    """Through ``liminal acp`` with a low trigger, a thread of 22 turns with tool calls: liminal
    moves it onto rewrites of Gemini's session at least twice (a memo placed in the dynamic zone
    of one), the client keeps one session id,
    sees no replay of the CLI's, every turn is answered, and the model's request after a swap is
    smaller than the one before it and holds the turn before the swap whole. ``/mark``,
    ``/context``, ``/search``, ``/recall``, ``/undo`` and ``/clear MARK`` work on it. A new
    sidecar on the same home (a restart: the CLI's start deletes the loaded sessions' files)
    loads it with the history from the store, once, and goes on; ``liminal threads`` lists it
    once."""
    from liminal.gradient.recall import KEY_IN_MARKER
    from liminal.gradient.zone import ZONE_INTRO
    from liminal.kernel.journal import SwapJournal

    rig = gemini
    script = Scenario()
    letters = "ABCDEFGHIJKLMNOPQRSTUV"
    for letter in letters:
        (rig.home.project / f"{letter}.txt").write_text(f"file {letter} says line\n" * 300)
        script.add(f"READ_{letter}", ToolCall("read_file", {"file_path": str(rig.home.project / f"{letter}.txt")}),
                   Text(f"read {letter}"))
    rig.server.script = script
    base = rig.overhead()
    high, target = base + 7_000, base + 4_500
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    with (rig.home.liminal_home / "config.toml").open("a") as config:
        config.write(f"[swap]\nhigh_tokens = {high}\ntarget_tokens = {target}\nhold_timeout_seconds = 60\n"
                     "[gradient]\nrecent_tokens = 1000\nmiddle_tokens = 3000\nsummary_tokens = 600\n")

    def said(client: AcpClient, thread: str, text: str) -> str:
        turn = client.prompt(thread, text, timeout=180)
        assert turn.stop_reason == "end_turn", (text, rig.stderr_tail())
        return turn.text

    def last_request() -> str:
        return json.dumps(rig.server.views()[-1].body["contents"])

    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = str(client.new_session(rig.home.project)["sessionId"])
        first = len(client.received)
        assert said(client, thread, "/memo the notes file lists every release #notes").startswith("Memo kept")
        for letter in letters:
            prompt = f"READ_{letter} please, the notes file" + (" kumquat" if letter == "C" else "")
            assert said(client, thread, prompt).endswith(f"read {letter}")
            if letter == "B":
                said(client, thread, "/mark M")
        tool_turns = len(rig.server.views())
        # No replay of the CLI's reached the client: each prompt shown once, none of its context.
        shown = user_texts(client.received, first, thread)
        assert not [t for t in shown if t.startswith("<session_context>")], shown[:3]
        assert not [t for t in shown if t.startswith("READ_")], shown[:3]

        context = said(client, thread, "/context")
        assert "Marks: M" in context, context
        assert "kumquat" in said(client, thread, "/search kumquat")
        keys = [k for v in rig.server.views() for k in KEY_IN_MARKER.findall(json.dumps(v.body))]
        assert keys, "a swap cut an older file to a marker"
        recalled = said(client, thread, f"/recall {keys[-1]}")
        assert recalled.count(" says line") == 300, recalled[:300]  # the whole file the marker cut
        undone = said(client, thread, "/undo")
        assert "out of the model's context" in undone, (undone, [(p.name, p.stat().st_size) for p in chats(rig)],
                                                        rig.stderr_tail())
        said(client, thread, "after the undo")
        seen = last_request()
        assert "after the undo" in seen and "READ_V please" not in seen and "READ_U please" in seen
        assert any(ZONE_INTRO in v.raw.decode() and "every release" in v.raw.decode() for v in rig.server.views()), \
            "a swap placed the memo in its dynamic zone"
        assert "cleared back to mark M" in said(client, thread, "/clear M")
        said(client, thread, "after the clear")
        seen = last_request()
        assert "after the clear" in seen and "READ_B please" in seen and "kumquat" not in seen, seen[-2000:]
        client.settle()
    assert client.session_ids() == {thread}

    swaps = SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
    committed = [s for s in swaps if s.outcome == "committed" and s.move == "swap"]
    assert len(committed) >= 2 and all(s.harness == "gemini" and s.thread_id == thread for s in swaps), (swaps, rig.stderr_tail())
    assert not rig.server.errors  # the strict fake refused nothing: one response per call
    # The model's request after each swap: smaller than the one before it, the turn before the
    # swap whole (its file's every line), the older ones cut or summarised.
    requests = list(zip(rig.server.content_requests(), rig.server.views(), strict=True))[:tool_turns]
    for swap in committed:
        moved_at = swap.started_at + swap.duration_s
        before = [v for r, v in requests if r.t <= swap.started_at]
        after = [v for r, v in requests if r.t > moved_at]
        if before and after:
            assert len(after[0].raw) < len(before[-1].raw), swap
            recent = before[-1].last_user_text.split("_")[-1][:1]
            held = json.dumps(after[0].body["contents"])
            assert json.dumps(f"file {recent} says line\n" * 300)[1:-1] in held, (swap, recent)
    last = json.dumps(requests[-1][1].body["contents"])
    assert json.dumps("file V says line\n" * 300)[1:-1] in last
    assert json.dumps("file A says line\n" * 300)[1:-1] not in last

    # A restart: a new sidecar and a new CLI on the same home.
    with rig.client(via_liminal=True) as client:
        client.initialize()
        start = len(client.received)
        client.load_session(thread, rig.home.project, timeout=120)
        client.settle(quiet=1)
        shown = user_texts(client.received, start, thread)
        again = said(client, thread, "after the restart")
        client.settle()
    assert client.session_ids() == {thread}
    assert "READ_A please, the notes file" in shown and "after the clear" in shown, shown
    assert not [t for t in shown if t.startswith("<session_context>")], shown
    assert max(shown.count(t) for t in shown) == 1, [(t[:60], shown.count(t)) for t in sorted(set(shown)) if shown.count(t) > 1]  # the history once
    assert again and not rig.server.errors, rig.stderr_tail()
    seen = last_request()
    assert "after the restart" in seen and "after the clear" in seen and "kumquat" not in seen
    listed = subprocess.run([sys.executable, "-m", "liminal", "threads", "--json"], env=rig.home.env(),
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert [t["id"] for t in json.loads(listed)].count(thread) == 1, listed


def test_mark_clear_and_undo_cut_a_gemini_thread(gemini: Rig) -> None:
    """``/mark``, ``/undo`` and ``/clear MARK`` through ``liminal acp`` on Gemini CLI: each move
    a cut of Gemini's session under a new id that the CLI loads, the client keeping one id."""
    from liminal.kernel.journal import SwapJournal

    rig = gemini
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = str(client.new_session(rig.home.project)["sessionId"])

        def say(text: str) -> str:
            turn = client.prompt(thread, text, timeout=180)
            assert turn.stop_reason == "end_turn", (text, rig.stderr_tail())
            return turn.text

        say("READ_NOTES please")
        say("alpha one")
        say("/mark A")
        say("bravo two")
        say("charlie three")
        answer = say("/undo")
        assert "out of the model's context" in answer, answer
        say("delta four")
        seen = json.dumps(rig.server.views()[-1].body["contents"])
        assert "delta four" in seen and "bravo two" in seen and "charlie three" not in seen, seen[-2000:]
        assert seen.count("functionResponse") == 1  # the tool turn's one response, not two
        answer = say("/clear A")
        say("echo five")
        seen = json.dumps(rig.server.views()[-1].body["contents"])
        assert "echo five" in seen and "alpha one" in seen and "bravo two" not in seen, (answer, seen[-2000:])
        client.settle()
    moves = SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
    assert [(m.move, m.outcome, m.harness) for m in moves] == [
        ("/undo", "committed", "gemini"), ("/clear A", "committed", "gemini")], moves
    assert client.session_ids() == {thread} and not rig.server.errors
