"""``session/delete`` of a thread with a swap behind it, through the real CLIs (issue 25).

liminal answers it for every CLI (advertised in ``initialize``'s capabilities): the agent's own
delete where it has one (claude-agent, codex-agent), the CLI's files of every session of the
thread (its own and the rewrite the swap wrote), the thread in the store. Another thread, and a
fork of the deleted one (``/fork``), are untouched; the deleted one is in neither ``session/list`` (this client's, a later one's) nor
``liminal threads --all`` nor ``liminal search``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from fixtures.harness import Adapter, Rig
from tests.acceptance.conftest import ADAPTER_NAMES, adapter_fixture
from tests.support.acp_thread import configure, liminal, liminal_client, records, said, scenario

adapter = adapter_fixture(ADAPTER_NAMES)


def session_files(rig: Rig) -> list[Path]:
    """Every file and folder the CLI keeps of its sessions, whatever their names."""
    roots = [rig.home.claude_config / "projects", rig.home.codex_home / "sessions",
             rig.home.codex_home / "archived_sessions"]
    return [p for root in roots if root.is_dir() for p in root.rglob("*")]


def naming(rig: Rig, session: str) -> list[Path]:
    return [p for p in session_files(rig) if session in p.name]


def gone(rig: Rig, sessions: list[str], timeout: float = 90) -> None:
    """Until no file of ``sessions`` is in the CLI's folders (a condition, waited on)."""
    deadline = time.monotonic() + timeout
    while any(naming(rig, s) for s in sessions):
        assert time.monotonic() < deadline, session_files(rig)
        time.sleep(0.2)


def test_delete_a_thread_with_a_swap_behind_it(adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    configure(rig, high=100_000, target=4_000)  # the swap is /optimise's: the test knows when
    with liminal_client(rig) as client:
        caps = client.initialize()["agentCapabilities"]
        assert "delete" in caps["sessionCapabilities"], caps
        doomed = client.new_session(rig.home.project)["sessionId"]
        for prompt in ["doomed first prompt quebec", "turn 0 BIG read please", "turn 1 BIG read please"]:
            said(client, doomed, prompt)
        assert "Context optimised" in said(client, doomed, "/optimise"), records(rig)
        said(client, doomed, "after the swap romeo")
        [swap] = records(rig)
        assert swap.outcome == "committed" and swap.new_backing_id, swap
        # A fork of it (/fork: a thread with a file of its own, cut from the doomed one's) stays.
        fork = said(client, doomed, "/fork").split("session ")[1].split(":")[0]
        kept = client.new_session(rig.home.project)["sessionId"]
        said(client, kept, "the kept thread sierra")
        client.settle()
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
