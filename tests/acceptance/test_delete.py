"""A thread with swaps behind it deleted through the real CLIs, by both doors (issues 25, 33).

``session/delete``: liminal answers it for every CLI (advertised in ``initialize``'s
capabilities): the agent's own delete where it has one (claude-agent, codex-agent), the CLI's
files of every session of the thread (its own and the rewrite the swap wrote), the thread in the
store, the recall cache's blobs of its sessions. ``liminal threads delete --yes``, with no
liminal or agent running, takes the same. Another thread, and a fork of the deleted one
(``/fork``), are untouched; the deleted one is in neither ``session/list`` (this client's, a
later one's) nor ``liminal threads --all`` nor ``liminal search``, and no recall key of it
resolves (``/recall``, ``liminal mcp``'s ``recall``, the recaller), though the cache had them.

The CLIs' logs of every session lose the thread's lines and keep the others': the name
codex-agent keeps for ``session/set_title`` (``session_index.jsonl``), and the prompts a person
typed in the CLI's own terminal interface after resuming a session there (``history.jsonl``: no
ACP adapter writes it, so the test appends the line the terminal would, a long paste with it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from fixtures.harness import AcpClient, Adapter, Rig
from liminal.config import Settings
from liminal.gradient.recall import KEY_IN_MARKER, RecallError
from liminal.harness.known import find_session_file
from liminal.lookup.recaller import Recaller
from liminal.store.cache import open_cache
from liminal.store.sqlite import SqliteStore
from tests.acceptance.conftest import ADAPTER_NAMES, adapter_fixture
from tests.support.acp_thread import (
    committed,
    configure,
    liminal,
    liminal_client,
    records,
    said,
    scenario,
)

adapter = adapter_fixture(ADAPTER_NAMES)


def session_files(rig: Rig) -> list[Path]:
    """Every file and folder the CLI keeps of its sessions, whatever their names."""
    roots = [rig.home.claude_config / "projects", rig.home.codex_home / "sessions",
             rig.home.codex_home / "archived_sessions"]
    return [p for root in roots if root.is_dir() for p in root.rglob("*")]


def naming(rig: Rig, session: str) -> list[Path]:
    return [p for p in session_files(rig) if session in p.name]


def named_anywhere(rig: Rig, sessions: list[str]) -> list[Path]:
    """Every file or folder in the CLI's home whose name holds one of ``sessions``."""
    root = rig.home.claude_config if rig.adapter.model_api == "anthropic" else rig.home.codex_home
    return [p for p in root.rglob("*") if any(s in p.name for s in sessions)]


def keys_of(rig: Rig, session: str) -> list[str]:
    path = find_session_file(session, str(rig.home.project), rig.home.env())
    assert path is not None, session
    return list(dict.fromkeys(KEY_IN_MARKER.findall(path.read_text())))


def held(rig: Rig, sessions: list[str]) -> dict[str, int]:
    """The recall cache's entries of each of ``sessions`` that has any."""
    async def look() -> dict[str, int]:
        async with open_cache(Settings(home=rig.home.liminal_home)) as cache:
            found = await cache.held()
        return {s: found[s] for s in sessions if found.get(s)}

    return anyio.run(look)


def recalled(rig: Rig, key: str) -> bool:
    """The key resolves through the recaller (the cache, the store, the CLI's files)."""
    async def recall() -> bool:
        store = await SqliteStore.open(rig.home.liminal_home / "liminal.db", create=False)
        try:
            async with open_cache(Settings(home=rig.home.liminal_home)) as cache:
                await Recaller(store, cache, rig.home.env()).recall(key)
            return True
        except RecallError:
            return False
        finally:
            await store.aclose()

    return anyio.run(recall)


def mcp_recall(rig: Rig, thread: str, key: str) -> tuple[str, bool]:
    """``liminal mcp``'s ``recall`` tool, as the CLI runs the server: its text, and whether it
    is an error."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "recall", "arguments": {"key": key}}}
    done = subprocess.run([sys.executable, "-m", "liminal.mcp", "--home", str(rig.home.liminal_home),
                           "--thread", thread], input=json.dumps(call) + "\n", capture_output=True,
                          text=True, env=rig.home.env(), timeout=120, check=False)
    result = json.loads(done.stdout.splitlines()[0])["result"]
    return "".join(c["text"] for c in result["content"]), result["isError"]


def codex_rows(rig: Rig, sessions: list[str]) -> int:
    """The rows Codex's databases keep of ``sessions`` (0 for Claude Code, which has none)."""
    import contextlib
    import sqlite3

    found = 0
    for database in rig.home.codex_home.glob("*_*.sqlite"):
        with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                columns = {row[1] for row in db.execute(f'PRAGMA table_info("{table}")')}
                for column in ({"thread_id"} | ({"id"} if table == "threads" else set())) & columns:
                    found += sum(db.execute(f'SELECT COUNT(*) FROM "{table}" WHERE "{column}" = ?', (s,))
                                 .fetchone()[0] for s in sessions)
    return found


def logs(rig: Rig) -> list[tuple[Path, str]]:
    """The CLI's logs of every session, each with the field that names a line's session."""
    if rig.adapter.model_api == "anthropic":
        return [(rig.home.claude_config / "history.jsonl", "sessionId")]
    return [(rig.home.codex_home / "session_index.jsonl", "id"), (rig.home.codex_home / "history.jsonl", "session_id")]


def logged(rig: Rig, sessions: list[str]) -> list[str]:
    """The lines of the CLI's logs that name one of ``sessions``."""
    return [line for path, key in logs(rig) if path.exists() for line in path.read_text().splitlines()
            if json.loads(line).get(key) in sessions]


def typed_in_terminal(rig: Rig, session: str, text: str) -> None:
    """The line the CLI's own terminal interface appends to its prompt history for a prompt typed
    in ``session`` (resumed there by a person), as Claude Code 2.1.44 and Codex write it; Claude
    Code's with a paste past 1,024 characters, kept apart under its hash."""
    if rig.adapter.model_api != "anthropic":
        line = {"session_id": session, "ts": int(time.time()), "text": text}
        path = rig.home.codex_home / "history.jsonl"
    else:
        digest = session.replace("-", "")[:16]
        pastes = rig.home.claude_config / "paste-cache"
        pastes.mkdir(exist_ok=True)
        (pastes / f"{digest}.txt").write_text(f"{text} " * 200)
        line = {"display": f"{text} [Pasted text #1 +0 lines]", "timestamp": int(time.time() * 1000),
                "project": str(rig.home.project), "sessionId": session,
                "pastedContents": {"1": {"id": 1, "type": "text", "contentHash": digest}}}
        path = rig.home.claude_config / "history.jsonl"
    with path.open("a") as log:
        log.write(json.dumps(line) + "\n")


def named_in_codex(client: AcpClient, rig: Rig, session: str, title: str) -> None:
    """A name given to the thread through ACP: codex-agent keeps it in ``session_index.jsonl``."""
    if rig.adapter.name == "codex-agent":
        assert client.request("session/set_title", {"sessionId": session, "title": title}) == {"title": title}


def gone(rig: Rig, sessions: list[str], timeout: float = 90) -> None:
    """Until nothing of ``sessions`` is in the CLI's folders, nor in its databases, nor a line of
    its logs (a condition, waited on)."""
    deadline = time.monotonic() + timeout
    while named_anywhere(rig, sessions) or codex_rows(rig, sessions) or logged(rig, sessions):
        assert time.monotonic() < deadline, (named_anywhere(rig, sessions), codex_rows(rig, sessions),
                                             logged(rig, sessions))
        time.sleep(0.2)


def test_delete_a_thread_with_a_swap_behind_it(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    # The swap is /optimise's (the test knows when); a middle band wide enough that the rewrite
    # cuts the BIG outputs to markers rather than summarising them.
    configure(rig, high=200_000, target=9_000, middle=6_000)
    with liminal_client(rig) as client:
        caps = client.initialize()["agentCapabilities"]
        assert "delete" in caps["sessionCapabilities"], caps
        doomed = client.new_session(rig.home.project)["sessionId"]
        for prompt in ["doomed first prompt quebec", *(f"turn {n} BIG read please" for n in range(4))]:
            said(client, doomed, prompt)
        assert "Context optimised" in said(client, doomed, "/optimise"), records(rig)
        said(client, doomed, "after the swap romeo")
        [swap] = records(rig)
        assert swap.outcome == "committed" and swap.new_backing_id, swap
        # Its recall keys asked: the cache holds what they name.
        keys = keys_of(rig, swap.new_backing_id)
        assert keys, records(rig)
        for key in keys[:3]:
            assert "neither the store" not in said(client, doomed, f"/recall {key}"), key
        assert held(rig, [doomed, swap.new_backing_id]), keys
        # A fork of it (/fork: a thread with a file of its own, cut from the doomed one's) stays.
        fork = said(client, doomed, "/fork").split("session ")[1].split(":")[0]
        kept = client.new_session(rig.home.project)["sessionId"]
        said(client, kept, "the kept thread sierra")
        for thread, words in ((doomed, "doomed"), (kept, "kept")):
            named_in_codex(client, rig, thread, f"the {words} thread's name")
            typed_in_terminal(rig, thread, f"typed in the {words} thread")
        client.settle()
        assert len(logged(rig, [doomed, swap.new_backing_id])) == len(logged(rig, [kept])) >= 1
        assert naming(rig, doomed) and naming(rig, swap.new_backing_id), session_files(rig)
        kept_files = naming(rig, kept) + naming(rig, fork)
        assert naming(rig, kept) and naming(rig, fork), session_files(rig)
        listed = {s["sessionId"] for s in client.request(
            "session/list", {"cwd": str(rig.home.project)})["sessions"]}
        assert {doomed, kept, fork} <= listed, listed

        assert client.request("session/delete", {"sessionId": doomed}, timeout=120) == {}

        listed = {s["sessionId"] for s in client.request(
            "session/list", {"cwd": str(rig.home.project)})["sessions"]}
        assert doomed not in listed and swap.new_backing_id not in listed and {kept, fork} <= listed, listed
        # The CLI may write a session's file again as its process ends (Claude Code's exit
        # records), after the delete was answered: liminal removes it again.
        gone(rig, [doomed, swap.new_backing_id])
        assert all(p.exists() for p in kept_files), kept_files
        assert logged(rig, [kept]) and not logged(rig, [doomed, swap.new_backing_id])
        # No key of it resolves, though the cache had them: nothing of its sessions is left there.
        for key in keys[:3]:
            assert "neither the store nor a session file" in said(client, kept, f"/recall {key}"), key
        assert held(rig, [doomed, swap.new_backing_id]) == {}
        said(client, kept, "the kept thread goes on tango")  # its session is untouched
        client.settle()

    # After the client closed (the index worker has stored every frame it had, the deleted
    # thread's last ones among them): still gone, for a person and for the next client.
    shown = {t["id"] for t in json.loads(liminal(rig, "threads", "--json", "--all"))}
    assert doomed not in shown and {kept, fork} <= shown, shown
    assert "quebec" not in liminal(rig, "search", "quebec")
    assert "sierra" in liminal(rig, "search", "sierra")
    with liminal_client(rig) as client:
        client.initialize()
        listed = {s["sessionId"] for s in client.request(
            "session/list", {"cwd": str(rig.home.project)})["sessions"]}
        assert doomed not in listed and swap.new_backing_id not in listed and kept in listed, listed
    gone(rig, [doomed, swap.new_backing_id])



@pytest.mark.parametrize("adapter", ["claude-agent", "codex-agent"], indirect=True)
def test_liminal_threads_delete_takes_every_file_and_blob_of_a_thread_that_swapped(
        adapter: Adapter, rig: Rig) -> None:
    """``liminal threads delete THREAD --yes`` after the editor closed (no liminal, no agent):
    every session of the thread's lineage (two swaps' rewrites) goes from the CLI's folders, and
    every blob the cache kept of them, however it was recalled (``/recall``, ``liminal mcp``);
    the fork and the other thread keep theirs. Before, every key resolved afterwards and every
    file stayed."""
    rig.server.script = scenario()
    # The swaps are /optimise's (the test knows when); a middle band wide enough that a rewrite
    # cuts the BIG outputs to markers rather than summarising them.
    configure(rig, high=200_000, target=9_000, middle=6_000)
    with liminal_client(rig) as client:
        client.initialize()
        doomed = client.new_session(rig.home.project)["sessionId"]
        for prompt in ["doomed first prompt quebec", *(f"turn {n} BIG read please" for n in range(4))]:
            said(client, doomed, prompt)
        assert "Context optimised" in said(client, doomed, "/optimise"), records(rig)
        for n in range(4, 6):
            said(client, doomed, f"turn {n} BIG read please")
        assert "Context optimised" in said(client, doomed, "/optimise"), records(rig)
        said(client, doomed, "after the swaps romeo")
        fork = said(client, doomed, "/fork").split("session ")[1].split(":")[0]
        kept = client.new_session(rig.home.project)["sessionId"]
        for prompt in ["the kept thread sierra", *(f"turn {n} BIG read please" for n in range(6, 10))]:
            said(client, kept, prompt)
        assert "Context optimised" in said(client, kept, "/optimise"), records(rig)
        for thread, words in ((doomed, "doomed"), (kept, "kept")):
            named_in_codex(client, rig, thread, f"the {words} thread's name")
        moves = committed(rig)
        lineage = [doomed] + [r.new_backing_id or "" for r in moves if r.thread_id == doomed]
        [kept_now] = [r.new_backing_id or "" for r in moves if r.thread_id == kept]
        assert len(lineage) == 3, moves
        # (A rewrite of a rewrite may consolidate the cut turns into its preamble: no key left.)
        keys = list(dict.fromkeys(k for session in lineage[1:] for k in keys_of(rig, session)))
        kept_keys = keys_of(rig, kept_now)
        assert keys and kept_keys, (keys, kept_keys, moves)
        for key in [*keys[:2], *kept_keys[:2]]:
            assert "neither the store" not in said(client, kept, f"/recall {key}"), key
        client.settle()
    text, failed = mcp_recall(rig, kept, keys[-1])  # the model's tool: another process, the same cache
    assert not failed and text, text
    assert held(rig, lineage) and held(rig, [kept])
    assert all(naming(rig, s) for s in lineage)
    codex = rig.adapter.model_api != "anthropic"
    assert not codex or codex_rows(rig, lineage)  # its title, its first prompt, its items
    kept_files = naming(rig, kept) + naming(rig, kept_now) + naming(rig, fork)
    typed_in_terminal(rig, lineage[-1], "typed in the doomed thread")
    typed_in_terminal(rig, kept_now, "typed in the kept thread")
    named = len(logged(rig, lineage))
    assert named == len(logged(rig, [kept, kept_now])) >= 1

    said_back = liminal(rig, "threads", "delete", doomed, "--yes")
    assert said_back.startswith(f"deleted thread {doomed}: "), said_back
    assert f"{named} line{'s' if named > 1 else ''} in the CLI's logs" in said_back, said_back

    assert named_anywhere(rig, lineage) == [] and logged(rig, lineage) == []
    assert len(logged(rig, [kept, kept_now])) == named
    # The CLI writing a line of it again (Codex names a session after its first turn, whenever
    # that is): counted by ``liminal doctor``, removed by ``liminal threads purge``.
    typed_in_terminal(rig, doomed, "written again")
    doctor = subprocess.run([sys.executable, "-m", "liminal", "doctor"], env=rig.home.env(),
                            capture_output=True, text=True, timeout=120, check=False).stdout
    assert "1 line in the CLI's logs" in doctor, doctor
    assert "1 line in the CLI's logs" in liminal(rig, "threads", "purge")
    assert logged(rig, lineage) == [] and len(logged(rig, [kept, kept_now])) == named
    assert codex_rows(rig, lineage) == 0 and (not codex or codex_rows(rig, [kept]))
    assert kept_files and all(p.exists() for p in kept_files), kept_files
    assert held(rig, lineage) == {} and held(rig, [kept])
    for key in keys:
        assert not recalled(rig, key), key
        text, failed = mcp_recall(rig, kept, key)
        assert failed, (key, text)
    assert all(recalled(rig, key) for key in kept_keys)
    assert "quebec" not in liminal(rig, "search", "quebec")
    assert "sierra" in liminal(rig, "search", "sierra")
    shown = {t["id"] for t in json.loads(liminal(rig, "threads", "--json", "--all"))}
    assert doomed not in shown and {kept, fork} <= shown, shown
    with liminal_client(rig) as client:
        client.initialize()
        listed = {s["sessionId"] for s in client.request(
            "session/list", {"cwd": str(rig.home.project)})["sessions"]}
        assert doomed not in listed and kept in listed, listed
        client.load_session(kept, rig.home.project, timeout=120)
        assert "neither the store nor a session file" in said(client, kept, f"/recall {keys[0]}")
    assert named_anywhere(rig, lineage) == []
