"""A swap that does not finish leaves no trace: no rewritten file, no session left open, the
thread on its old session, and the journal saying so; a start after a crash cleans up what an
unfinished swap left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal import faults
from liminal.config import GradientSettings, SwapSettings
from liminal.harness.claude.live import ClaudeSessions
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.swap import SwapManager
from tests.integration.test_swap_scripted import FakeHarness, agent_received, settings, start
from tests.support.inproc import proxy_in_process
from tests.support.proxy_process import scripted_agent_argv

pytestmark = pytest.mark.anyio


def rewrites(folder: Path, *keep: str) -> list[str]:
    """Session files in ``folder`` other than the ones named: what a swap wrote."""
    return sorted(p.stem for p in folder.glob("*-*-*-*-*.jsonl") if p.stem not in keep)


async def reached(points: Path, point: str) -> None:
    """Until the paused failpoint ``point`` has been reached (``liminal.faults``)."""
    with anyio.fail_after(20):
        while not (points / f"{point}.reached").exists():  # noqa: ASYNC110 - another process writes it
            await anyio.sleep(0.01)


@pytest.mark.parametrize("point", ["swap.move", "swap.moved"])
async def test_a_client_that_leaves_during_a_swap_leaves_no_rewrite_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    # Headless clients disconnect right after the turn that triggers a swap (an idle timeout).
    # ``swap.move``: before the resume is sent; ``swap.moved``: the agent has opened it. The swap
    # never ends (paused there): the stop's grace runs out, and it is abandoned.
    monkeypatch.setattr(faults, "_POINTS", {point: "pause"})
    monkeypatch.setenv("LIMINAL_FAILPOINTS_DIR", str(tmp_path / "points"))
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    harness = FakeHarness(tmp_path)
    manager = SwapManager(settings(), journal, harness, stop_grace=0.2)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        await reached(tmp_path / "points", point)
        [new_id] = rewrites(tmp_path, thread)  # the rewrite exists while the swap runs
        # leaving the block closes the client: liminal stops while the swap waits
    assert rewrites(tmp_path, thread) == []
    assert proxy.router.backing_of(thread) == thread
    [record] = journal.records()
    assert record.outcome == "abandoned" and record.new_backing_id == new_id
    # What happened, in words (it said "stopped during the swap (CancelledError)").
    assert record.reason == ("the client closed its connection during the swap, and the swap did not "
                             "finish within proxy.stop_grace_seconds (0.2 s): the rewrite was removed, "
                             "and the thread's next load decides again")
    assert journal.unfinished() == []


@pytest.mark.parametrize("failure", ["rewrite", "session/resume", "skipped", "timeout",
                                     "timeout after the move"])
async def test_a_swap_that_fails_removes_its_rewrite(
    tmp_path: Path, failure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIMINAL_FAILPOINTS_DIR", str(tmp_path / "points"))
    harness = FakeHarness(tmp_path)
    if failure == "skipped":
        harness.after = 150_000  # the rewrite is not below the trigger: not worth a swap
    env = {"AGENT_FAIL": "session/resume"} if failure == "session/resume" else {}
    swap_settings = settings()
    if failure.startswith("timeout"):
        swap_settings = SwapSettings(high_tokens=100_000, target_tokens=80_000, hold_timeout_seconds=0.5)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(swap_settings, journal, harness)
    faults_before = dict(faults._POINTS)
    if failure == "timeout":
        faults._POINTS["swap.move"] = "pause"  # the move never ends: the hold times out
    elif failure == "timeout after the move":
        faults._POINTS["swap.moved"] = "pause"  # the agent has the new session, then time out
    try:
        async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager], **env) as (proxy, client):
            thread = await start(client)
            if failure == "rewrite":
                harness.fail = True
            await client.prompt(thread, "used:130000")
            await manager.wait_for_swaps(1)
            assert proxy.router.backing_of(thread) == thread
            answer = await client.prompt(thread, "chunks:1")
            assert answer["result"]["stopReason"] == "end_turn"
    finally:
        faults._POINTS.clear()
        faults._POINTS.update(faults_before)
    assert rewrites(tmp_path, thread) == []
    [record] = journal.records()
    assert record.outcome in {"failed", "abandoned", "skipped"}
    assert journal.unfinished() == []
    closes = [m["params"]["sessionId"] for m in agent_received(tmp_path)
              if m.get("method") == "session/close"]
    if failure in ("session/resume", "timeout after the move"):  # the agent may have it open
        assert closes == [record.new_backing_id]


async def test_a_start_after_a_crash_removes_what_an_unfinished_swap_left(tmp_path: Path) -> None:
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    thread = "0b7d1f4e-0000-4000-8000-000000000001"
    orphan = "0b7d1f4e-0000-4000-8000-00000000000a"
    (tmp_path / f"{thread}.jsonl").write_text("original\n")
    (tmp_path / f"{orphan}.jsonl").write_text("rewrite\n")
    (tmp_path / f".{orphan}.jsonl.4242.tmp").write_text("half a rewrite")
    # What liminal journals before the rewrite exists; it was killed before the end record
    # (its lock on the attempt went with its process).
    journal.append(SwapRecord(thread, thread, orphan, "begin", "", 0.0, 0.0, 150_000, None,
                             new_path=str(tmp_path / f"{orphan}.jsonl")))
    manager = SwapManager(settings(), journal, ClaudeSessions(GradientSettings()))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        await start(client)
        assert proxy.router.backing_of(thread) == thread
    assert (tmp_path / f"{thread}.jsonl").read_text() == "original\n"
    assert not (tmp_path / f"{orphan}.jsonl").exists()
    assert journal.unfinished() == []
    [record] = journal.records()
    assert record.outcome == "abandoned" and "next start" in record.reason


async def test_with_swapping_off_a_swapped_thread_still_resumes_on_its_current_session(
    tmp_path: Path,
) -> None:
    from liminal.config import Settings, StoreSettings
    from liminal.wiring import components

    settings_off = Settings(home=tmp_path / "home", swap=SwapSettings(enabled=False),
                            store=StoreSettings(index=False))
    thread = "0b7d1f4e-0000-4000-8000-000000000001"
    current = "0b7d1f4e-0000-4000-8000-00000000000b"
    SwapJournal(settings_off.journal_path).append(
        SwapRecord(thread, thread, current, "committed", "context", 0.0, 0.1, 150_000, 90_000))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, components(settings_off)) as (_, client):
        await client.request("initialize", {"protocolVersion": 1})
        loaded = await client.request("session/load", {"sessionId": thread, "cwd": "/work", "mcpServers": []})
        assert "result" in loaded
        await client.prompt(thread, "used:150000 chunks:1")  # past the trigger: no swap, it is off
    sent = [m for m in agent_received(tmp_path) if m.get("method") in ("session/load", "session/prompt")]
    assert {m["params"]["sessionId"] for m in sent} == {current}
    assert [r.outcome for r in SwapJournal(settings_off.journal_path).records()] == ["committed"]


def test_a_start_after_a_crash_removes_what_an_unfinished_codex_swap_left(tmp_path: Path) -> None:
    # A Codex rollout is named rollout-<time>-<id>.jsonl, not <id>.jsonl: the clean-up must
    # know a rewrite by its CLI's own naming, or the orphan stays in Codex's resume picker.
    from liminal.harness.base import HarnessChoice
    from liminal.harness.known import known_harnesses

    home = tmp_path / "codex"
    day = home / "sessions" / "2026" / "11" / "25"
    day.mkdir(parents=True)
    thread = "0b7d1f4e-0000-4000-8000-000000000001"
    orphan = "0b7d1f4e-0000-4000-8000-00000000000a"
    original = day / f"rollout-2026-11-25T10-00-00-{thread}.jsonl"
    rewrite = day / f"rollout-2026-11-25T10-05-00-{orphan}.jsonl"
    original.write_text("original\n")
    rewrite.write_text("rewrite\n")
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    journal.append(SwapRecord(thread, thread, orphan, "begin", "", 0.0, 0.0, 150_000, None,
                             harness="codex", new_path=str(rewrite)))
    # Started as liminal starts it for Claude Code: the journal's record says whose file it is.
    choice = HarnessChoice(known_harnesses(GradientSettings(), {"CODEX_HOME": str(home)}), forced="claude")
    SwapManager(settings(), journal, choice.harness)._recover()
    assert original.read_text() == "original\n"
    assert not rewrite.exists()
    assert journal.unfinished() == []
    [record] = journal.records()
    assert record.outcome == "abandoned"


def test_a_damaged_begin_never_removes_a_session_a_thread_is_or_was_on(tmp_path: Path) -> None:
    # A begin whose id is another thread's original session (a damaged or hand-edited journal):
    # that file is the CLI's and the user's history; only a rewrite liminal made may go.
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    one = "0b7d1f4e-0000-4000-8000-000000000001"
    two = "0b7d1f4e-0000-4000-8000-000000000002"
    two_now = "0b7d1f4e-0000-4000-8000-00000000000b"
    for session in (one, two, two_now):
        (tmp_path / f"{session}.jsonl").write_text("history\n")
    journal.append(SwapRecord(two, two, two_now, "committed", "", 0.0, 0.1, 150_000, 90_000))
    journal.append(SwapRecord(one, one, two, "begin", "", 0.0, 0.0, 150_000, None,
                             new_path=str(tmp_path / f"{two}.jsonl")))
    journal.append(SwapRecord(one, one, "../" + one, "begin", "", 0.0, 0.0, 150_000, None,
                             new_path=str(tmp_path / f"{one}.jsonl")))
    SwapManager(settings(), journal, ClaudeSessions(GradientSettings()))._recover()
    for session in (one, two, two_now):
        assert (tmp_path / f"{session}.jsonl").read_text() == "history\n"


async def test_a_liminal_starting_during_another_ones_swap_leaves_that_swap_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two editor windows (two ``liminal acp``), or a new ``liminal serve`` connection, share one
    # journal: the start of one must not take the other's swap under way for a crash's leftover.
    monkeypatch.setattr(faults, "_POINTS", {"swap.moved": "pause"})
    monkeypatch.setenv("LIMINAL_FAILPOINTS_DIR", str(tmp_path / "points"))
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    harness = FakeHarness(tmp_path)
    manager = SwapManager(settings(), journal, harness, stop_grace=0)
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (_, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        await reached(tmp_path / "points", "swap.moved")
        [new_id] = rewrites(tmp_path, thread)  # the agent has the new session open
        other = SwapManager(settings(), SwapJournal(tmp_path / "swaps.jsonl"), FakeHarness(tmp_path))
        await anyio.to_thread.run_sync(other._recover)
        assert rewrites(tmp_path, thread) == [new_id]
        assert [r.new_backing_id for r in journal.unfinished()] == [new_id]
        assert journal.records() == []
    [record] = journal.records()  # and it ends as its own liminal says
    assert record.outcome == "abandoned" and record.reason.startswith(
        "the client closed its connection during the swap, and proxy.stop_grace_seconds is 0")
    assert rewrites(tmp_path, thread) == []
    assert list(journal.moving_folder.iterdir()) == []  # no attempt's lock outlives it


async def test_a_load_sent_at_once_after_a_start_goes_to_the_threads_current_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The journal is read while the client's first bytes already arrive (a long journal, a slow
    # disk): a load forwarded before the thread is bound would resume it on its stale original,
    # without every turn since the swap.
    from liminal.config import Settings, StoreSettings
    from liminal.wiring import components

    real_recover = SwapManager._recover

    def slow_recover(self: SwapManager, *args: Any) -> list[SwapRecord]:
        import time

        time.sleep(0.5)
        return real_recover(self, *args)

    monkeypatch.setattr(SwapManager, "_recover", slow_recover)
    home_settings = Settings(home=tmp_path / "home", swap=settings(summaries=False),  # no side sessions
                             store=StoreSettings(index=False))
    thread = "0b7d1f4e-0000-4000-8000-000000000001"
    current = "0b7d1f4e-0000-4000-8000-00000000000b"
    SwapJournal(home_settings.journal_path).append(
        SwapRecord(thread, thread, current, "committed", "context", 0.0, 0.1, 150_000, 90_000))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, components(home_settings)) as (_, client):
        await client.request("initialize", {"protocolVersion": 1})
        loaded = await client.request("session/load", {"sessionId": thread, "cwd": "/work", "mcpServers": []})
        assert "result" in loaded
    sent = [m for m in agent_received(tmp_path) if m.get("method") == "session/load"]
    assert [m["params"]["sessionId"] for m in sent] == [current]


async def test_a_commit_record_whose_write_reports_an_error_binds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The committed line reached the file but its write reported an error (an fsync's EIO): the
    # swap is undone and its rewrite removed, so a restart must not bind the thread to it, or
    # it would resume on a session whose file is gone.
    real_append = SwapJournal.append

    def append(self: SwapJournal, record: SwapRecord) -> None:
        real_append(self, record)
        if record.outcome == "committed":
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(SwapJournal, "append", append)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        with anyio.fail_after(10):
            while not any(r.outcome == "abandoned" for r in journal.records()):  # noqa: ASYNC110
                await anyio.sleep(0.01)
        assert proxy.router.backing_of(thread) == thread
        answer = await client.prompt(thread, "chunks:1")
        assert answer["result"]["stopReason"] == "end_turn"
    assert rewrites(tmp_path, thread) == []
    assert journal.lineage() == []
    assert journal.unfinished() == []


async def test_the_swap_manager_started_again_after_a_failure_swaps_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The supervisor starts a failed component again (a journal write that failed once): it
    # must work then, not fail at once and be switched off, leaving swaps off for the session.
    from liminal import supervise

    monkeypatch.setattr(supervise, "RESTART_PAUSE_SECONDS", (0.05, 0.05, 0.05))
    real_append = SwapJournal.append
    failed: list[SwapRecord] = []

    def append(self: SwapJournal, record: SwapRecord) -> None:
        if record.outcome == "committed" and not failed:
            failed.append(record)
            raise OSError(28, "No space left on device")
        real_append(self, record)

    monkeypatch.setattr(SwapJournal, "append", append)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    manager = SwapManager(settings(), journal, FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        await client.prompt(thread, "used:130000")
        with anyio.fail_after(10):
            while not failed or manager.busy():  # noqa: ASYNC110
                await anyio.sleep(0.01)
        await anyio.sleep(0.2)  # restarted by now
        for _ in range(3):  # the thread backs off two turn ends after the failure
            await client.prompt(thread, "used:130000")
        with anyio.fail_after(10):
            await manager.wait_for_swaps(1)
        assert proxy.router.backing_of(thread) != thread
    assert [r.outcome for r in journal.records()] == ["abandoned", "committed"]


async def test_a_client_that_closes_its_input_during_a_swap_gets_an_answer_to_its_held_prompt(
    tmp_path: Path,
) -> None:
    # A headless client writes its prompts and closes its input, then reads the answers: the
    # prompt a swap held (it never reached the agent) must be answered too, not dropped.
    from tests.support.proxy_process import ProxyProcess, run_liminal

    points = tmp_path / "points"
    held_id = 12

    async def body(proxy: ProxyProcess) -> None:
        await proxy.request("initialize", {"protocolVersion": 1}, rpc_id=1)
        thread = (await proxy.request("session/new", {"cwd": "/work/project", "mcpServers": []},
                                      rpc_id=2))["result"]["sessionId"]
        await proxy.request("session/prompt", {"sessionId": thread, "prompt": [
            {"type": "text", "text": "first used:5000"}]}, rpc_id=10)
        await proxy.request("session/prompt", {"sessionId": thread, "prompt": [
            {"type": "text", "text": "the turn that triggers a swap used:130000"}]}, rpc_id=11)
        await reached(points, "swap.move")
        await proxy.send(json.dumps({"jsonrpc": "2.0", "id": held_id, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "held"}]}}).encode() + b"\n")
        await proxy.close_stdin()  # at once: the prompt is read before the end of input, held or not
        await proxy.wait_exit()
        assert [m for m in proxy.messages() if m.get("id") == held_id], proxy.stderr.decode()[-2000:]

    await run_liminal(tmp_path, body, LIMINAL_SWAP_HIGH_TOKENS="100000", LIMINAL_SWAP_TARGET_TOKENS="20000",
                      LIMINAL_STORE_INDEX="false", LIMINAL_FAILPOINTS="swap.move=pause",
                      LIMINAL_FAILPOINTS_DIR=str(points))


@pytest.mark.parametrize("store", ["not answering", "off"])
async def test_a_listing_shows_a_thread_once_whatever_another_liminal_swapped_since_the_start(
    tmp_path: Path, store: str
) -> None:
    # Another liminal on the same home (an editor's second window, a serve connection) swapped
    # a thread after this one started, and is in the middle of another swap of it: the agent
    # lists the rewrites as sessions; this liminal (its store not answering) must still show the
    # thread once, never a rewrite a user could open as a conversation of its own.
    from contextlib import asynccontextmanager

    from liminal.kernel.commands import CommandCenter
    from liminal.store.base import StoreError

    @asynccontextmanager
    async def unavailable():  # type: ignore[no-untyped-def]
        raise StoreError("no store here")
        yield  # pragma: no cover

    journal = SwapJournal(tmp_path / "swaps.jsonl")
    harness = FakeHarness(tmp_path)
    # Under the threshold: the loads below only make the agent see the sessions; a load that
    # swapped one of them (it would, at the fake's default size) would make it a thread here,
    # listed with its own rewrite, whenever that swap won the race with the listing.
    harness.tokens = 90_000
    manager = SwapManager(settings(), journal, harness)
    commands = CommandCenter(manager.model, manager.mover, manager.journal, manager.policy,
                             FakeHarness(tmp_path),  # type: ignore[arg-type]
                             unavailable if store == "not answering" else None)
    done = "0b7d1f4e-0000-4000-8000-00000000000b"
    under_way = "0b7d1f4e-0000-4000-8000-00000000000c"
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager, commands], AGENT_LIST="1") as (_, client):
        thread = await start(client)
        for session in (done, under_way):  # the agent has these files (it lists what it saw)
            await client.request("session/load", {"sessionId": session, "cwd": "/work", "mcpServers": []})
        other = SwapJournal(tmp_path / "swaps.jsonl")
        other.append(SwapRecord(thread, thread, done, "committed", "context", 0.0, 0.1, 150_000, 90_000))
        other.begin(SwapRecord(thread, done, under_way, "begin", "", 0.0, 0.0, 150_000, None,
                               new_path=str(tmp_path / f"{under_way}.jsonl")))
        listed = await client.request("session/list", {})
        other.finish(under_way)
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [thread]


async def test_a_thread_another_liminal_moved_since_the_start_opens_on_its_current_session(
    tmp_path: Path,
) -> None:
    # A long-lived liminal (a serve connection, an editor window) opens a thread that another
    # liminal on the home has swapped since this one read the journal: opened on the session it
    # has left, the conversation would go on without every turn since the swap.
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    harness = FakeHarness(tmp_path)
    harness.tokens = 90_000  # what the other's rewrite left: the load swaps nothing
    manager = SwapManager(settings(), journal, harness)
    thread = "0b7d1f4e-0000-4000-8000-000000000001"
    moved = "0b7d1f4e-0000-4000-8000-00000000000b"
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        await client.request("initialize", {"protocolVersion": 1})
        await client.request("session/new", {"cwd": "/work", "mcpServers": []})
        SwapJournal(tmp_path / "swaps.jsonl").append(  # the other liminal's swap
            SwapRecord(thread, thread, moved, "committed", "context", 0.0, 0.1, 150_000, 90_000))
        loaded = await client.request("session/load", {"sessionId": thread, "cwd": "/work", "mcpServers": []})
        assert "result" in loaded
        await client.prompt(thread, "chunks:1")
        assert proxy.router.backing_of(thread) == moved
    sent = [m for m in agent_received(tmp_path) if m.get("method") in ("session/load", "session/prompt")]
    assert {m["params"]["sessionId"] for m in sent} == {moved}
    assert {m["params"]["sessionId"] for m in client.messages() if "params" in m} <= {thread}
