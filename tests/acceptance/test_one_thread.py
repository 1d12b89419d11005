"""One thread, one name (issue 20), with the real CLIs through ``liminal acp``.

A thread liminal moves (three swaps, a ``/clear MARK``, an ``/undo``) is carried by six sessions
of the agent. ``liminal threads``, run as the command against the rig's store, must list it once,
with its first title, however the CLI titles the sessions it moved onto; so must ``session/list``,
and the editor must not see the thread renamed after each move. A session a client opens and
never prompts (acpx's ``sessions new``) must not stay in the lists for good. With the CLI's own
titles on (Claude Code asks the model for a title), the CLI's listing of each session the thread
moved onto (what its picker shows) keeps the thread's title too.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio

from fixtures.harness import AcpClient, Adapter, Reply, Rig, Scenario, Shell, Text
from fixtures.harness.script import ModelRequest
from liminal.kernel.journal import SwapRecord
from liminal.store.sqlite import SqliteStore
from tests.acceptance.conftest import adapter_fixture
from tests.support.acp_thread import (
    BIG,
    FIRST,
    committed,
    configure,
    liminal,
    liminal_client,
    said,
    scenario,
)

adapter = adapter_fixture(["claude-agent", "codex-agent"])


def moving(rig: Rig) -> None:
    # Each BIG turn adds ~3-5k tokens; the leeway (high - target) must exceed one (test_swap).
    configure(rig, high=9_000, target=4_000)


def listed_ids(table: str) -> list[str]:
    """The THREAD column of ``liminal threads``: each thread's shortest unique prefix."""
    return [line.split()[0] for line in table.splitlines()[1:] if line.strip()]


def titles(frames: list[Any]) -> list[str]:
    return [f.msg["params"]["update"]["title"] for f in frames
            if f.method == "session/update" and f.msg["params"]["update"].get("sessionUpdate")
            == "session_info_update" and isinstance(f.msg["params"]["update"].get("title"), str)]


def move_a_thread(rig: Rig, client: AcpClient) -> tuple[str, list[SwapRecord]]:
    """A thread with three swaps, then ``/clear M`` (M set before the first swap) and ``/undo``."""
    thread = client.new_session(rig.home.project)["sessionId"]
    said(client, thread, FIRST)
    assert "Mark M set" in said(client, thread, "/mark M")
    for text in BIG:
        said(client, thread, text)
        if len(committed(rig)) >= 3:
            break
    assert len(committed(rig)) == 3, rig.stderr_tail()
    assert "cleared back to mark M" in said(client, thread, "/clear M")
    said(client, thread, "gamma after clear")
    said(client, thread, "beta two")
    assert "out of the model's context" in said(client, thread, "/undo")
    said(client, thread, "delta after undo")
    client.settle()
    moves = committed(rig)
    assert [m.reason for m in moves][-2:] == ["/clear M", "/undo"] and len(moves) == 5
    return thread, moves


def test_liminal_threads_lists_a_moved_thread_once_with_its_first_title(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    moving(rig)
    with liminal_client(rig) as client:
        client.initialize()
        thread, moves = move_a_thread(rig, client)
    backings = [m.new_backing_id for m in moves]
    assert len(set(backings)) == 5 and thread not in backings
    seen = titles(client.received)
    first = seen[0] if seen else FIRST  # the agent's first title for it, else its first prompt's words
    assert first == FIRST, seen

    # The command, as a person runs it: one thread, its first title, every move in its lineage.
    [listed] = json.loads(liminal(rig, "threads", "--json"))
    assert (listed["id"], listed["title"], listed["state"], listed["swaps"]) == (thread, first, "active", 5)
    assert listed["moves"] == 5  # every move: the table's MOVES
    assert listed["backing_ids"] == [thread, *backings]
    text = liminal(rig, "threads")
    # The title as the table fits it in 100 columns (the whole of it is in --json, above).
    assert listed_ids(text) == [thread[:len(listed_ids(text)[0])]] and first[:16] in text, text
    assert json.loads(liminal(rig, "history", thread[:8], "--json"))["thread"]["title"] == first

    # What the agent titled each session: the CLI's own titles of the sessions the thread moved
    # onto reached the store as sent (and on main became the thread's title), never the client.
    async def stored_titles() -> dict[str, set[str]]:
        store = await SqliteStore.open(rig.home.liminal_home / "liminal.db", create=False)
        try:
            by_session: dict[str, set[str]] = {}
            for f in await store.frames(limit=1_000_000):
                if f.direction == "a2c" and b'"session_info_update"' in f.raw:
                    update = json.loads(f.raw)["params"]["update"]
                    if isinstance(update.get("title"), str):
                        by_session.setdefault(f.backing_id or "", set()).add(update["title"])
            return by_session
        finally:
            await store.aclose()

    by_session = anyio.run(stored_titles)
    own = by_session.pop(thread, set())
    assert set(seen) <= own | {FIRST}, (seen, own)
    if adapter.name == "claude-agent":  # Claude Code titles each new session after its last prompt
        assert any(t != first for ts in by_session.values() for t in ts), by_session

    # session/list, from the next editor window: the thread once, its title.
    with liminal_client(rig) as again:
        again.initialize()
        sessions = again.request("session/list", {"cwd": str(rig.home.project)})["sessions"]
    ours = [s for s in sessions if s["sessionId"] in {thread, *backings}]
    assert [(s["sessionId"], s.get("title")) for s in ours] == [(thread, first)], sessions


def test_a_session_opened_and_never_prompted_leaves_no_row(adapter: Adapter, rig: Rig) -> None:
    """acpx's ``sessions new`` opens a session and leaves: on main ``liminal threads`` and every
    later ``session/list`` had an empty row for it for good."""
    with liminal_client(rig) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, FIRST)
        empty = client.new_session(rig.home.project)["sessionId"]
        client.settle()
    assert [t["id"] for t in json.loads(liminal(rig, "threads", "--json"))] == [thread]
    rows = listed_ids(liminal(rig, "threads"))
    assert rows == [thread[:len(rows[0])]], rows
    assert {t["id"] for t in json.loads(liminal(rig, "threads", "--all", "--json"))} == {thread, empty}
    with liminal_client(rig) as again:
        again.initialize()
        listed = [s["sessionId"] for s in again.request("session/list", {"cwd": str(rig.home.project)})["sessions"]]
    assert thread in listed and empty not in listed, listed


class TitledScenario(Scenario):
    """Claude Code's title requests (side requests asking for JSON with a "title") answered with
    a title made from the session text's first word: a title the CLI generated for a session
    whose first prompt is not the thread's would differ ("About gamma")."""

    def __call__(self, request: ModelRequest) -> Reply:
        if request.is_side_request and "Return JSON with a single" in json.dumps(request.body):
            session = request.last_user_text.partition("<session>")[2].partition("</session>")[0]
            words = re.findall(r"[a-z]+", session)
            return Reply((Text(json.dumps({"title": f"About {words[0] if words else 'nothing'}"})),))
        return super().__call__(request)


def test_the_clis_own_title_follows_the_thread(make_rig: Any) -> None:
    rig: Rig = make_rig("claude-agent")
    rig.server.script = TitledScenario().add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
    moving(rig)
    with liminal_client(rig) as client:
        client.initialize()
        thread, moves = move_a_thread(rig, client)
    assert set(titles(client.received)) == {"About alpha"}
    # The CLI's listing of its sessions (the SDK's, as its picker reads the files): every
    # session the thread moved onto carries the thread's title.
    with rig.client(via_liminal=False) as direct:
        direct.initialize()
        cli_titles = {s["sessionId"]: s.get("title")
                      for s in direct.request("session/list", {"cwd": str(rig.home.project)})["sessions"]}
    lineage = [thread, *(m.new_backing_id for m in moves)]
    assert {cli_titles.get(b) for b in lineage} == {"About alpha"}, cli_titles
    [listed] = json.loads(liminal(rig, "threads", "--json"))
    assert (listed["id"], listed["title"]) == (thread, "About alpha")
