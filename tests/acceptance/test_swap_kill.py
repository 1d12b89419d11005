"""liminal killed (SIGKILL) inside swaps with the real Claude Code and Codex (issue 21).

``tests/integration/test_swap_kill.py`` kills liminal at random points over a scripted agent,
which writes its turn before answering; Claude Code 2.1.44 (claude-zed) writes it about 0.1 s
after, and takes a second or more to open a session (Codex's app server, codex-agent, too). Here liminal is killed, with nothing of it
left to clean up, at each point of a swap, each stopped there by a failpoint
(``liminal.faults``): its ``begin`` journaled and nothing written (``swap.rewrite``), its
rewrite on disk (``swap.move``), the adapter holding the rewrite open (``swap.moved``). After
each kill liminal starts again and the promises must hold: the thread loads and goes on, on a
session that has every turn; no rewrite is left in the CLI's folder (what its own picker lists)
nor in liminal's ``session/list``; the journal ends every attempt it began. A last run swaps
for real, and the conversation goes on whole; its client then leaves while the next swap opens
its rewrite, and gives liminal a second or two, as an editor that quits does: with no grace for
swaps at the stop (``proxy.stop_grace_seconds = 0``), that swap is abandoned and its rewrite
removed before the agent is stopped (it was left in the CLI's folder). (With the grace, the
default, a kill inside it leaves the rewrite to the next start: ``tests/integration/
test_swap_kill.py``.)
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import anyio
import pytest

from fixtures.harness import AcpClient, Adapter, Rig, Scenario
from fixtures.harness.acp_client import PromptResult
from liminal.harness.known import find_session_file
from liminal.kernel.journal import SwapJournal
from tests.acceptance.conftest import adapter_fixture
from tests.support.mongo import recorded
from tests.support.processes import descendants

adapter = adapter_fixture(["claude-agent", "claude-zed", "codex-agent"])
POINTS = ("swap.rewrite", "swap.move", "swap.moved")


def liminal_client(rig: Rig, **env: str) -> AcpClient:
    n = len(rig.clients)
    client = AcpClient(rig.home.liminal_argv(), {**rig.home.env(), **env}, rig.home.project,
                       rig.home.logs / f"stderr-{n}-liminal.log")
    rig.clients.append(client)
    return client


def said(client: AcpClient, thread: str, text: str) -> None:
    result = client.prompt(thread, text, timeout=180)
    assert result.stop_reason == "end_turn", text


def liminal_pid(client: AcpClient) -> int:
    """The ``liminal acp`` process (inside the rig's namespace, a descendant of the client's)."""
    [found] = [p.pid for p in descendants(client.proc.pid) if p.cmdline.split()[1:4] == ["-m", "liminal", "acp"]]
    return found


def wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never reached"
        time.sleep(0.02)


def session_ids_on_disk(rig: Rig) -> set[str]:
    """The sessions the CLI's own picker lists: Claude Code's files in the project's folder,
    Codex's rollouts (``rollout-<time>-<session id>.jsonl``)."""
    claude = {p.stem for p in rig.home.claude_config.glob("projects/*/*.jsonl")}
    return claude | {p.stem[-36:] for p in rig.home.codex_home.glob("sessions/*/*/*/rollout-*.jsonl")}


def seen_by_model(rig: Rig) -> str:
    return rig.server.views()[-1].raw.decode()


def mode_of(opened: dict[str, object]) -> str:
    """The session's current mode: ``session/set_mode`` to it changes nothing, and a thread's
    request, held behind a swap, is answered once the swap is over."""
    modes = opened.get("modes")
    assert isinstance(modes, dict), opened
    return str(modes["currentModeId"])


def swap_at_every_turn_end(rig: Rig) -> SwapJournal:
    """liminal's config for the rig: a swap at every turn end, as soon as the turn is on disk;
    nothing is cut (the context is far below the target), so a committed swap keeps every turn
    byte for byte. Returns the journal the swaps are in."""
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        "[swap]\nevery_turns = 1\nhigh_tokens = 1000000\ntarget_tokens = 900000\n"
        "hold_timeout_seconds = 120\n")
    return SwapJournal(rig.home.liminal_home / "swaps.jsonl")


def test_liminal_killed_inside_swaps_keeps_every_promise(adapter: Adapter, rig: Rig, tmp_path: Path) -> None:
    rig.server.script = Scenario()
    journal = swap_at_every_turn_end(rig)
    prompts: list[str] = []

    def turn(client: AcpClient, thread: str) -> None:
        prompts.append(f"turn {len(prompts)}: hello")
        said(client, thread, prompts[-1])

    # The thread's first turns, with no swap.
    with liminal_client(rig, LIMINAL_SWAP_EVERY_TURNS="0") as client:
        client.initialize()
        opened = client.new_session(rig.home.project)
        thread, mode = opened["sessionId"], mode_of(opened)
        turn(client, thread)
        turn(client, thread)
    original = session_ids_on_disk(rig)
    assert original == {thread}

    for point in POINTS:
        reached = tmp_path / point / f"{point}.reached"
        client = liminal_client(rig, LIMINAL_FAILPOINTS=f"{point}=pause",
                                LIMINAL_FAILPOINTS_DIR=str(reached.parent))
        with client:
            client.initialize()
            client.load_session(thread, rig.home.project, timeout=120)
            turn(client, thread)  # answered; the swap starts at its end and stops at the point
            wait_for(reached)
            began = [r for r in journal.unfinished() if r.thread_id == thread]
            assert len(began) == 1, journal.records(begins=True)
            rewrite = Path(str(began[0].new_path))
            assert rewrite.exists() == (point != "swap.rewrite"), point
            os.kill(liminal_pid(client), signal.SIGKILL)
            client.proc.wait(60)

        # liminal again: the thread loads on the session that has every turn, and goes on.
        with liminal_client(rig, LIMINAL_SWAP_EVERY_TURNS="0") as again:
            again.initialize()
            again.load_session(thread, rig.home.project, timeout=120)
            turn(again, thread)
            context = seen_by_model(rig)
            assert all(p in context for p in prompts), (point, prompts, rig.stderr_tail())
            listed = [s["sessionId"] for s in again.request("session/list", {"cwd": str(rig.home.project)})["sessions"]]
            assert listed.count(thread) == 1 and began[0].new_backing_id not in listed, (point, listed)
        assert not rewrite.exists(), point
        assert session_ids_on_disk(rig) == original, (point, session_ids_on_disk(rig))
        assert journal.unfinished() == [], point
        [ended] = [r for r in journal.records() if r.new_backing_id == began[0].new_backing_id]
        assert ended.outcome == "abandoned" and "removed at the next start" in ended.reason, ended
        assert journal.current(thread)[0] is None  # no commit: the thread is on its own session
        assert not list((rig.home.liminal_home / "swaps.moving").glob("*.lock")), point

    # And a swap that runs to its end: the conversation goes on whole on the rewrite.
    with liminal_client(rig, LIMINAL_PROXY_STOP_GRACE_SECONDS="0") as client:
        client.initialize()
        client.load_session(thread, rig.home.project, timeout=120)
        turn(client, thread)
        client.request("session/set_mode", {"sessionId": thread, "modeId": mode}, timeout=180)
        turn(client, thread)  # on the rewrite; its end starts another swap, which the close cuts
        assert all(p in seen_by_model(rig) for p in prompts), prompts
        assert client.session_ids() == {thread}
    current, lineage = journal.current(thread)
    assert current is not None and session_ids_on_disk(rig) == original | set(lineage), (lineage, rig.stderr_tail())
    records = journal.records()
    # The three kills, each ended at the next start; the swap the close cut, if it had begun
    # (the client may close while the turn settles, before it begins), ended by liminal itself.
    assert [r.outcome for r in records if "removed at the next start" in r.reason] == ["abandoned"] * len(POINTS)
    assert "committed" in [r.outcome for r in records], records
    assert all(r.outcome in ("committed", "abandoned") for r in records), records
    assert journal.unfinished() == []


def stored_prompt(liminal_home: Path, thread: str, text: str) -> None:
    """Wait until liminal has recorded the client's prompt ``text``: it has read it, whatever it
    did with it then."""

    async def wait() -> None:
        with anyio.fail_after(120):
            async with recorded(liminal_home) as store:
                while not any(text in m.text for m in await store.messages(thread, kind="user")):  # noqa: ASYNC110 (another process writes it: no event to wait on)
                    await anyio.sleep(0.05)

    anyio.run(wait)


@pytest.mark.parametrize("adapter", ["claude-agent", "codex-agent"], indirect=True)
def test_a_prompt_sent_while_a_swap_holds_the_thread_is_answered_on_its_new_session(
        adapter: Adapter, rig: Rig, tmp_path: Path) -> None:
    """A swap holds its thread from the turn end to its commit. Here it is held there (the
    failpoint ``swap.moved=hold``: the agent has the rewrite open, nothing committed) while the
    client sends its next prompt, which liminal reads and keeps: the model is not asked. Let go,
    the swap commits and the prompt goes to the new session: answered there, with every turn
    before it in the model's context, under the one thread id."""
    rig.server.script = Scenario()
    journal = swap_at_every_turn_end(rig)
    prompts = ["turn 0: hello", "turn 1: hello", "turn 2: hello"]
    # Two turns on disk first, with no swap: the next turn end swaps (the CLI writes a turn after
    # answering it, and a first turn end that finds no file backs off).
    with liminal_client(rig, LIMINAL_SWAP_EVERY_TURNS="0") as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, prompts[0])
        said(client, thread, prompts[1])
    points = tmp_path / "points"
    with liminal_client(rig, LIMINAL_FAILPOINTS="swap.moved=hold", LIMINAL_FAILPOINTS_DIR=str(points)) as client:
        client.initialize()
        client.load_session(thread, rig.home.project, timeout=120)
        said(client, thread, prompts[2])  # its end starts the swap, which stops at swap.moved
        wait_for(points / "swap.moved.reached")
        [began] = journal.unfinished()
        asked = len(rig.server.views())
        answers: list[PromptResult] = []
        held = threading.Thread(target=lambda: answers.append(client.prompt(thread, "held: hello", timeout=180)))
        held.start()
        stored_prompt(rig.home.liminal_home, thread, "held: hello")
        assert len(rig.server.views()) == asked and not answers  # kept: the model was not asked
        (points / "swap.moved.release").touch()
        held.join(180)
        assert [a.stop_reason for a in answers] == ["end_turn"], rig.stderr_tail()
        [committed] = [r for r in journal.records(thread) if r.outcome == "committed"]
        assert committed.new_backing_id == began.new_backing_id, journal.records(thread)
        context = seen_by_model(rig)
        assert "held: hello" in context and all(p in context for p in prompts), context[-3000:]
        new_file = find_session_file(str(began.new_backing_id), str(rig.home.project), rig.home.env())
        old_file = find_session_file(thread, str(rig.home.project), rig.home.env())
        assert new_file is not None and old_file is not None
        assert b"held: hello" in new_file.read_bytes() and b"held: hello" not in old_file.read_bytes()
        assert client.session_ids() == {thread}
