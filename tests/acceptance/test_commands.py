"""liminal's slash commands with the real Claude Code (issue 13): answered by liminal, never sent
to the CLI or the model, and what they do to the model's context seen at the strict fake model.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable

import anyio
import pytest

from fixtures.harness import AcpClient, Adapter, Rig, Scenario, Shell
from tests.acceptance.conftest import ADAPTER_NAMES, adapter_fixture
from tests.acceptance.conftest import CLAUDE_NAMES as CLAUDE
from tests.support.mongo import liminal_on_mongodb, needs_mongo_socket, recorded

adapter = adapter_fixture(CLAUDE)


def scenario() -> Scenario:
    return Scenario().add("TOOL", Shell("echo tool-output-here", "Echo"), "the tool ran")


def said(client: AcpClient, thread: str, text: str) -> str:
    """Send a prompt; the text of the answer (a command's is liminal's)."""
    result = client.prompt(thread, text, timeout=180)
    assert result.stop_reason == "end_turn", text
    return result.text


def last_request_text(rig: Rig) -> str:
    return json.dumps(rig.server.messages_requests()[-1].json["messages"])


def history(rig: Rig, thread: str) -> list[str]:
    async def read() -> list[str]:
        async with recorded(rig.home.liminal_home) as store:
            return [m.text for m in await store.messages(thread) if m.kind == "user"]

    return anyio.run(read)


def test_mark_clear_fork_undo_move_the_models_context(adapter: Adapter, rig: Rig) -> None:
    mark_clear_fork_undo(rig)


@needs_mongo_socket
def test_mark_clear_fork_undo_with_the_store_on_mongodb(make_rig: Callable[..., Rig]) -> None:
    """The marks /clear and /fork look up, the turns /undo takes out, the history: all from a
    MongoDB store."""
    rig = make_rig("claude-agent")
    with liminal_on_mongodb(rig.home.liminal_home):
        mark_clear_fork_undo(rig)
        assert not (rig.home.liminal_home / "liminal.db").exists()


def mark_clear_fork_undo(rig: Rig) -> None:
    rig.server.script = scenario()
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        requests = len(rig.server.messages_requests())
        said(client, thread, "first question alpha")
        # An adapter sends its command list on its own schedule (docs/facts.md): wait for it.
        client.wait_for(lambda frames: any(b'"available_commands_update"' in f.raw for f in frames), timeout=30)
        advertised = [f for f in client.received if b'"available_commands_update"' in f.raw
                      and b'"mark"' in f.raw]
        assert advertised, "liminal's commands are offered"
        said(client, thread, "second question TOOL bravo")
        assert "Mark A set" in said(client, thread, "/mark A")
        for word in ("charlie", "delta", "kilo"):
            said(client, thread, f"later question {word}")
        # Commands never reach the model: three real turns after the mark, no more requests.
        assert not any("/mark" in json.dumps(r.json) for r in rig.server.messages_requests()[requests:])

        # Malformed: answered, nothing changes.
        assert "nothing changed" in said(client, thread, "/clear NOSUCH")
        assert "nothing changed" in said(client, thread, "/mark two words")

        # /fork A: a session of what followed A, listed; the parent is unchanged.
        answer = said(client, thread, "/fork A")
        fork = answer.split("session ")[1].split(":")[0]
        listed = client.request("session/list", {"cwd": str(rig.home.project)})
        assert fork in [s["sessionId"] for s in listed["sessions"]]

        context = said(client, thread, "/context")
        assert "A swap now would keep: recent " in context and "Marks: A" in context, context

        # /clear A: the model sees the turns up to A and none after.
        assert "cleared back to mark A" in said(client, thread, "/clear A")
        said(client, thread, "after the clear foxtrot")
        seen = last_request_text(rig)
        assert "alpha" in seen and "bravo" in seen and "tool-output-here" in seen
        assert not any(w in seen for w in ("charlie", "delta", "kilo"))

        # /undo twice: the last two turns leave the context.
        said(client, thread, "one more golf")
        # Claude Code 2.1.44 writes a turn after answering it: each /undo waits for the last
        # turn to be on disk (it once cut at the wrong turn, its prompt taken for a command's).
        assert "out of the model's context" in said(client, thread, "/undo")
        assert "out of the model's context" in said(client, thread, "/undo")
        said(client, thread, "after two undos hotel")
        seen = last_request_text(rig)
        assert "hotel" in seen and "golf" not in seen and "foxtrot" not in seen and "bravo" in seen

        # /clear: nothing of the conversation reaches the model any more.
        said(client, thread, "/clear")
        said(client, thread, "fresh start india")
        seen = last_request_text(rig)
        assert "india" in seen and "alpha" not in seen and "hotel" not in seen
        assert client.session_ids() <= {thread, fork}

    # The history keeps everything, commands included.
    shown = history(rig, thread)
    for word in ("alpha", "charlie", "kilo", "golf", "hotel", "india", "/mark A", "/clear A"):
        assert any(word in text for text in shown), (word, shown)


def test_a_fork_of_what_followed_a_mark_takes_a_prompt(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "first question alpha")
        said(client, thread, "/mark A")
        said(client, thread, "later question charlie")
        fork = said(client, thread, "/fork A").split("session ")[1].split(":")[0]
    with rig.client(via_liminal=True) as other:
        other.initialize()
        other.load_session(fork, rig.home.project, timeout=120)
        said(other, fork, "in the fork juliet")
        seen = last_request_text(rig)
        assert "juliet" in seen and "charlie" in seen and "alpha" not in seen


@pytest.mark.parametrize("adapter", ADAPTER_NAMES, indirect=True)
def test_undo_takes_out_a_turn_the_user_cancelled(adapter: Adapter, rig: Rig) -> None:
    """Claude Code ends a cancelled turn with a "[Request interrupted by user for tool use]"
    line, Codex with ``turn_aborted``; /undo takes that whole turn out (on Claude Code it said
    "the last turn is not on disk yet")."""
    rig.server.script = Scenario().add("SLOW", Shell("python3 -c 'import time; time.sleep(60)'", "Wait"), "waited")
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "first question alpha")
        stopped: dict[str, str] = {}

        def slow_turn() -> None:
            stopped["reason"] = client.prompt(thread, "SLOW bravo", timeout=180).stop_reason

        runner = threading.Thread(target=slow_turn)
        runner.start()
        client.wait_for(lambda frames: any(b"time.sleep(60)" in f.raw for f in frames), timeout=120)
        client.notify("session/cancel", {"sessionId": thread})
        runner.join(120)
        assert stopped.get("reason") == "cancelled", stopped
        assert "out of the model's context" in said(client, thread, "/undo")
        said(client, thread, "after the undo charlie")
        seen = json.dumps(rig.server.views()[-1].body)
        assert "alpha" in seen and "charlie" in seen and "bravo" not in seen and "interrupted" not in seen


@pytest.mark.parametrize("adapter", ADAPTER_NAMES, indirect=True)
def test_a_thread_cleared_then_left_before_its_next_turn_opens_again(adapter: Adapter, rig: Rig) -> None:
    """/clear moves the thread to a fresh session, whose file the CLI writes only at its first
    turn: a liminal started again before that turn must still open the thread, its history
    shown and the model's context empty (the load went to a session the agent could not find:
    "Resource not found", every Claude adapter)."""
    rig.server.script = scenario()
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "first question alpha")
        assert "Context cleared" in said(client, thread, "/clear")
    with rig.client(via_liminal=True) as again:
        again.initialize()
        again.load_session(thread, rig.home.project, timeout=120)
        shown = json.dumps([f.msg for f in again.received if f.method == "session/update"])
        assert "first question alpha" in shown, "the history is shown"
        said(again, thread, "after the restart kilo")
        seen = json.dumps(rig.server.views()[-1].body)
        assert "kilo" in seen and "alpha" not in seen


FACT = "remember: the launch word is zanzibar-77"
# What must never be a find: the CLIs' bookkeeping records, liminal's own commands, ids.
NOT_SAID = ("api-request", "system-reminder", "response_item", "event_msg", "/search", "/rename",
            "Thread renamed", "@0000")


@pytest.mark.parametrize("adapter", ADAPTER_NAMES, indirect=True)
def test_search_shows_what_was_said_once_with_a_time_and_a_place(adapter: Adapter, rig: Rig) -> None:
    """Issue 20: /search returned a copy of the prompt from Claude Code's api-request-blob record,
    with no time, and liminal search liminal's own /search, its answer and /rename among its
    finds, labelled with internal ids. Both show the conversation: each thing said once, with a
    time and where (the turn; the CLI the thread's title too)."""
    rig.server.script = Scenario().add("TOOL", Shell("echo zanzibar-tool-output", "Echo"), "the tool ran")
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, FACT)
        said(client, thread, "TOOL please")
        said(client, thread, "/rename Flux work")
        said(client, thread, "/search zanzibar")  # its prompt and answer are liminal's, not finds
        answer = said(client, thread, "/search zanzibar")
    lines = answer.splitlines()
    assert answer.count(FACT) == 1 and "- turn 1 · " in answer, answer
    assert all(re.match(r"- turn \d · \d{4}-\d\d-\d\d \d\d:\d\d · ", line) for line in lines), answer
    assert re.search(rf"^- turn 1 · [^·]+ · you: {FACT}$", answer, re.M), answer
    assert any(line.startswith("- turn 2 · ") and " · tool (" in line for line in lines), answer
    for word in (*NOT_SAID, thread):
        assert word not in answer, (word, answer)

    found = subprocess.run([sys.executable, "-m", "liminal", "search", "zanzibar"], env=rig.home.env(),
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert found.count(FACT) == 1 and "· Flux work · turn 1 · you\n" in found, found
    for word in (*NOT_SAID, thread):
        assert word not in found, (word, found)
    assert all(len(line) <= 100 for line in found.splitlines()), found
    everything = subprocess.run([sys.executable, "-m", "liminal", "search", "zanzibar", "--all"],
                                env=rig.home.env(), capture_output=True, text=True, timeout=60,
                                check=True).stdout
    assert "/search zanzibar" in everything, everything


ORIGINAL = "\n".join(str(i) for i in range(10000, 12001))


def threads_json(rig: Rig, *flags: str) -> dict[str, dict[str, object]]:
    """``liminal threads --json`` as a person would run it: id -> thread."""
    out = subprocess.run([sys.executable, "-m", "liminal", "threads", "--json", *flags], env=rig.home.env(),
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return {t["id"]: t for t in json.loads(out)}


def session_list(client: AcpClient, rig: Rig) -> dict[str, dict[str, object]]:
    listed = client.request("session/list", {"cwd": str(rig.home.project)})["sessions"]
    return {s["sessionId"]: s for s in listed}


@pytest.mark.parametrize("adapter", ADAPTER_NAMES, indirect=True)
def test_recall_memo_memos_rename_archive_as_a_person_types_them(adapter: Adapter, rig: Rig) -> None:
    """The commands nothing tested (issue 21), through the real CLI: ``/recall KEY`` after a swap
    answers the bytes the marker cut; ``/memo`` in one thread is found by ``/memos`` in another;
    ``/rename`` shows in ``liminal threads`` and ``session/list``; ``/archive`` hides the thread
    from both, also after the editor opens it again (on main the load made it active: listed
    again); bad arguments are answered and change nothing; none reaches the model."""
    script = Scenario().add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
    rig.server.script = script
    base = rig.overhead()
    rig.server.script = script
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    with (rig.home.liminal_home / "config.toml").open("a") as config:
        # No swap but /optimise's, to a target the big output does not fit in whole: cut to a
        # marker (with less room, codex-zed's rewrite leaves its call out altogether).
        config.write(f"[swap]\nhigh_tokens = 10000000\ntarget_tokens = {base + 4000}\n"
                     "hold_timeout_seconds = 60\n"
                     "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 40000\nsummary_tokens = 600\n")
    with rig.client(via_liminal=True) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "first question alpha")
        said(client, thread, "BIG please")
        said(client, thread, "a short turn")
        said(client, thread, "another short turn")
        assert "Context optimised" in said(client, thread, "/optimise")
        said(client, thread, "after the swap bravo")
        requests = len(rig.server.views())
        keys = re.findall(r"call liminal's recall tool with key (\S+?)\]", json.dumps(rig.server.views()[-1].body))
        assert keys, "the swap cut the big output to a marker"

        # /recall: what the marker cut, as the CLI's tool gave it back (Codex's has its exit
        # code and timing around the output).
        recalled = said(client, thread, f"/recall {keys[0]}")
        assert ORIGINAL in recalled and len(recalled) < len(ORIGINAL) + 400, recalled[:300]
        assert said(client, thread, "/recall") == "/recall KEY (from a truncation marker)"
        assert said(client, thread, "/recall not-a-key") == "not a recall key: 'not-a-key'"

        # /memo here, /memos from another thread.
        assert said(client, thread, "/memo deploys need the VPN #ops") == "Memo kept with #ops."
        assert said(client, thread, "/memo #ops") == "/memo TEXT #tag (nothing changed)"
        other = client.new_session(rig.home.project)["sessionId"]
        assert said(client, other, "/memos #ops") == "- deploys need the VPN  #ops"
        assert said(client, other, "/memos vpn") == "- deploys need the VPN  #ops"
        assert said(client, other, "/memos #nothing") == "No memos found."

        # /rename: both lists show the name.
        assert said(client, thread, "/rename") == "/rename TITLE (nothing changed)"
        assert said(client, thread, "/rename  Flux   work ") == "Thread renamed: Flux work"
        assert session_list(client, rig)[thread]["title"] == "Flux work"
        assert threads_json(rig)[thread]["title"] == "Flux work"

        # /archive: hidden from both; the thread goes on working.
        assert said(client, thread, "/archive now") == "/archive takes no arguments (nothing changed)"
        assert thread in session_list(client, rig) and thread in threads_json(rig)
        assert said(client, thread, "/archive").startswith("Thread archived")
        assert thread not in session_list(client, rig) and thread not in threads_json(rig)
        assert threads_json(rig, "--all")[thread]["state"] == "archived"
        said(client, thread, "still working charlie")
        assert "charlie" in json.dumps(rig.server.views()[-1].body)
        # Of everything typed since the swap, only that prompt reached the model.
        asked = rig.server.views()[requests:]
        assert asked and all("charlie" in json.dumps(v.body) for v in asked), len(asked)
        seen = json.dumps([v.body for v in rig.server.views()])
        for word in ("deploys need the VPN", "Flux", "/archive now", "Thread archived", f"/recall {keys[0]}",
                     "not-a-key", "#nothing", "Memo kept"):
            assert word not in seen, word

    # The editor starts again and opens the thread: it stays archived.
    with rig.client(via_liminal=True) as again:
        again.initialize()
        again.load_session(thread, rig.home.project, timeout=120)
        said(again, thread, "after the restart delta")
        assert thread not in session_list(again, rig)
    assert thread not in threads_json(rig)
    assert threads_json(rig, "--all")[thread]["title"] == "Flux work"
