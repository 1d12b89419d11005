"""The kernel driven as the router is: literal frames in, through the thread model, and a fake
port (``tests/support/fakeport.py``) for everything it does; no process, no proxy.

The swap (hold inside the flush that saw the turn end, rewrite, resume, commit, release to the
new session, close the old one) and each of liminal's commands that needs no store (the store's
commands are driven the same way, with every store, in ``tests/store/test_typed_commands.py``).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.acp.port import OwnRequestError
from liminal.config import SwapSettings
from liminal.harness.base import Rewritten, Turns
from liminal.kernel.aids import CommandAids, Preamble
from liminal.kernel.commands import CommandCenter
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.memory import Memory, unknown
from liminal.kernel.recycle import Recycler
from liminal.kernel.swap import SwapManager
from liminal.kernel.threads import MoveLocks
from liminal.mcp.link import SlashRequest
from tests.integration.test_swap_scripted import FakeHarness
from tests.support.fakeport import FakePort

pytestmark = pytest.mark.anyio
THREAD = "9b1f3a55-2c41-4c6e-9a57-0d6f2f4f0e11"
CAPS = {"loadSession": True, "sessionCapabilities": {"resume": {}, "close": {}}}


class CuttingHarness(FakeHarness):
    """The fake harness with what the commands read: positions, turns, cuts."""

    def position(self, path: Path) -> int:
        return 100

    def turns(self, path: Path) -> Turns:
        return Turns(starts=(0, 50), earlier=False)

    def cut(self, parts: list[tuple[Path, int, int | None]], like: Path, new_id: str, *,
            keeps_thread: bool = False, scratchpad: str | None = None) -> Rewritten:
        new_path = self.target_path(like, new_id)
        new_path.write_text("{}\n")
        return Rewritten(new_id, new_path, 150_000, 40_000)

    def bands(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> dict[str, dict[str, int]]:
        return {"recent": {"turns": 1, "tokens": 2_000}}


def agent_answers(opened: list[str]) -> Callable[[str, dict[str, Any]], Any]:
    """The agent's side of liminal's own requests: every session it is asked for exists."""

    def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "session/new":
            opened.append(f"7a1b2c3d-0000-4000-8000-{len(opened):012d}")
            return {"sessionId": opened[-1]}
        if method == "session/list":
            raise OwnRequestError(method, {"code": -32601, "message": "not here"})
        return {}

    return answer


def request(rpc_id: int, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}


def prompt(rpc_id: int, text: str) -> dict[str, Any]:
    return request(rpc_id, "session/prompt", sessionId=THREAD, prompt=[{"type": "text", "text": text}])


def usage(used: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": THREAD, "update": {"sessionUpdate": "usage_update", "used": used, "size": 200_000}}}


def answered(rpc_id: int, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def sent(port: FakePort, method: str) -> list[dict[str, Any]]:
    return [m for m in port.to_agent if m.get("method") == method]


@asynccontextmanager
async def kernel(tmp_path: Path, *, commands: bool = False, harness: CuttingHarness | None = None,
                 caps: dict[str, Any] = CAPS, recycler: list[Recycler] | None = None,
                 memory: Memory | None = None) -> AsyncIterator[tuple[FakePort, SwapManager]]:
    """The swap manager (and the command center, and the recycle into ``recycler``) on a fake
    port, a thread opened and prompted once (its context 20k tokens: no swap)."""
    harness = harness or CuttingHarness(tmp_path)
    preamble = Preamble(memory or unknown())
    manager = SwapManager(SwapSettings(high_tokens=100_000, target_tokens=80_000, hold_timeout_seconds=10),
                          SwapJournal(tmp_path / "swaps.jsonl"), harness, preamble=preamble)
    others: list[Any] = []
    if commands:
        center = CommandCenter(manager.model, manager.mover, manager.journal, manager.policy, harness,
                               open_store=None, aids=CommandAids(preamble))
        others.append(center)
    if recycler is not None:
        recycler.append(Recycler(manager.model, manager.mover, harness, manager.settings, max_stale_sessions=0))
        others.append(recycler[0])
    port = FakePort(components=[manager, *others], answer=agent_answers([]))
    await manager.prepare(port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run, port)
        for other in others:
            tg.start_soon(other.run, port)
        while not manager._running:  # noqa: ASYNC110 - turn ends are taken once the task looks
            await anyio.sleep(0.001)
        port.from_client(request(0, "initialize", protocolVersion=1))
        port.from_agent(answered(0, {"protocolVersion": 1, "agentCapabilities": caps}))
        port.from_client(request(1, "session/new", cwd="/work", mcpServers=[]))
        port.from_agent(answered(1, {"sessionId": THREAD, "modes": {"currentModeId": "default"}}))
        port.from_client(prompt(2, "first"))
        port.from_agent(usage(20_000), answered(2, {"stopReason": "end_turn"}))
        yield port, manager
        tg.cancel_scope.cancel()


async def test_an_own_request_that_times_out_leaves_the_agent_idle() -> None:
    """The fake port asks as the proxy's does (``liminal.proxy.ask``): a request nobody answers
    is given up at its timeout and forgotten, so the agent counts as idle again (a hand copy of
    the request path had kept it pending: ``agent_idle()`` stayed False), and a request to an
    agent that is gone fails at once."""
    port = FakePort()
    assert port.agent_idle()
    with pytest.raises(TimeoutError):
        await port.request("session/list", {}, timeout=0.05)
    assert port.agent_idle()
    port.router.agent_gone(0.0, "exited")
    with pytest.raises(OwnRequestError):
        await port.request("session/list", {}, timeout=5)


async def test_a_load_of_a_thread_another_liminal_moved_goes_to_its_current_session(tmp_path: Path) -> None:
    """Another liminal on the home moved the thread after this one read the journal: the swap
    manager's request hook reads on and binds the thread before the router routes the load
    (and the command center's hook, after it, sees the thread where it is)."""
    async with kernel(tmp_path, commands=True) as (port, _):
        moved = "4d6c8e2a-1f3b-4a5c-9d7e-2b8f6a1c3e50"
        SwapJournal(tmp_path / "swaps.jsonl").append(SwapRecord(
            thread_id=THREAD, old_backing_id=THREAD, new_backing_id=moved, outcome="committed",
            reason="swap", started_at=0.0, duration_s=0.0, tokens_before=None, tokens_after=None,
            move="swap"))
        port.from_client(request(5, "session/load", sessionId=THREAD, cwd="/work", mcpServers=[]))
        assert port.backing_of(THREAD) == moved
        [load] = sent(port, "session/load")
        assert load["params"]["sessionId"] == moved


async def test_a_swap_runs_through_the_thread_model_and_the_port(tmp_path: Path) -> None:
    async with kernel(tmp_path) as (port, manager):
        port.from_client(request(3, "session/set_mode", sessionId=THREAD, modeId="plan"))
        port.from_agent(answered(3, {}))
        port.from_client(prompt(4, "second"))
        port.from_agent(usage(130_000), answered(4, {"stopReason": "end_turn"}))
        # Held inside the flush that delivered the turn's end: the next prompt waits.
        assert port.is_held(THREAD)
        port.from_client(prompt(5, "third"))
        assert not [m for m in port.to_agent if m.get("id") == 5]
        with anyio.fail_after(10):
            await manager.wait_for_swaps(1)
    new = port.backing_of(THREAD)
    assert new != THREAD and not port.is_held(THREAD)
    [resume] = sent(port, "session/resume")
    assert resume["params"] == {"sessionId": new, "cwd": "/work", "mcpServers": []}
    assert resume["id"].startswith("liminal-")  # the router's own namespace
    assert sent(port, "session/set_mode")[-1]["params"] == {"sessionId": new, "modeId": "plan"}
    [held] = [m for m in port.to_agent if m.get("id") == 5]
    assert held["params"]["sessionId"] == new  # released to the new session
    [close] = sent(port, "session/close")
    assert close["params"] == {"sessionId": THREAD}
    assert port.to_agent.index(resume) < port.to_agent.index(held) < port.to_agent.index(close)
    [note] = [data for method, data in port.notes if method == "liminal/swap"]
    assert note["outcome"] == "committed" and note["new_backing_id"] == new
    # The notice waits for the thread's next turn (the released prompt's).
    assert any(m.get("method") == "session/update" and m["params"]["update"].get("_meta")
               for m in port.to_client)


async def test_a_turn_ended_with_an_error_is_no_swap(tmp_path: Path) -> None:
    async with kernel(tmp_path) as (port, manager):
        port.from_client(prompt(4, "second"))
        port.from_agent(usage(130_000), {"jsonrpc": "2.0", "id": 4, "error": {"code": -1, "message": "no"}})
        assert not port.is_held(THREAD) and manager.completed == 0


async def say(port: FakePort, rpc_id: int, text: str) -> str:
    """A prompt the command center answers: its text, once the prompt has its answer."""
    start = len(port.to_client)
    port.from_client(prompt(rpc_id, text))
    with anyio.fail_after(10):
        while not [m for m in port.to_client[start:] if m.get("id") == rpc_id]:  # noqa: ASYNC110 - no event
            await anyio.sleep(0.005)
    said = port.to_client[start:]
    assert said[-1] == answered(rpc_id, {"stopReason": "end_turn"})
    assert not [m for m in port.to_agent if m.get("id") == rpc_id]  # never reached the agent
    return "".join(m["params"]["update"]["content"]["text"] for m in said[:-1]
                   if m["params"]["update"].get("sessionUpdate") == "agent_message_chunk")


@pytest.mark.parametrize(("command", "moves", "says"), [
    ("/clear", True, "Context cleared."),
    ("/optimise", True, "Context optimised: 150k -> 90k tokens."),
    ("/undo", True, "Took the last turn out of the model's context (150k -> 40k tokens)"),
    ("/fork", False, "Forked this thread's context as session"),
    ("/mark A", False, "Mark A set here."),
    ("/marks", False, "No marks in this thread."),
    ("/context", False, "Context: 20k tokens."),
    ("/search x", False, "the store is off"),
])
async def test_each_command_runs_through_the_thread_model_and_the_port(
    tmp_path: Path, command: str, moves: bool, says: str
) -> None:
    async with kernel(tmp_path, commands=True) as (port, _):
        text = await say(port, 10, command)
    assert says in text, text
    new = port.backing_of(THREAD)
    assert (new != THREAD) is moves, new
    if moves:  # the session left is closed, after the move's release
        assert sent(port, "session/close")[-1]["params"] == {"sessionId": THREAD}
        [note] = [data for method, data in port.notes if method == "liminal/swap"]
        assert note["outcome"] == "committed" and note["move"] == command


class Scratchpad(Memory):
    """The thread's scratchpad, as a store would give it."""

    def __init__(self) -> None:
        super().__init__(unknown().settings, None)

    async def scratchpad(self, thread: str) -> str | None:
        return f"the scratchpad of {thread}"


class PadHarness(CuttingHarness):
    """What each rewrite and cut was given for the preamble's scratchpad."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.pads: list[tuple[str, str | None]] = []

    def rewrite(self, path: Path, target_tokens: int, new_id: str, *, memos: Any = (),
                recent_tokens: int | None = None, scratchpad: str | None = None) -> Rewritten:
        self.pads.append(("rewrite", scratchpad))
        return super().rewrite(path, target_tokens, new_id, memos=memos, recent_tokens=recent_tokens)

    def cut(self, parts: list[tuple[Path, int, int | None]], like: Path, new_id: str, *,
            keeps_thread: bool = False, scratchpad: str | None = None) -> Rewritten:
        self.pads.append(("cut", scratchpad))
        return super().cut(parts, like, new_id, keeps_thread=keeps_thread)


@pytest.mark.parametrize("known", [True, False])
async def test_every_move_gives_the_harness_the_threads_scratchpad(tmp_path: Path, known: bool) -> None:
    """A swap, /optimise, /undo and /clear MARK each read the thread's scratchpad for the
    preamble they write or keep (``liminal.kernel.memory``); not known (no store), None: the
    earlier preamble's stays. /fork copies the context as it is."""
    harness = PadHarness(tmp_path)
    async with kernel(tmp_path, commands=True, harness=harness, memory=Scratchpad() if known else None) \
            as (port, manager):
        port.from_client(prompt(4, "second"))
        port.from_agent(usage(130_000), answered(4, {"stopReason": "end_turn"}))
        with anyio.fail_after(10):
            await manager.wait_for_swaps(1)
        harness.tokens = 20_000
        for n, command in enumerate(["/optimise", "/mark A", "/undo", "/clear A", "/fork"]):
            await say(port, 10 + n, command)
    pad = f"the scratchpad of {THREAD}" if known else None
    assert harness.pads == [("rewrite", pad), ("rewrite", pad), ("cut", pad), ("cut", pad), ("cut", None)]


async def test_a_mark_then_clear_to_it_through_the_port(tmp_path: Path) -> None:
    async with kernel(tmp_path, commands=True) as (port, manager):
        assert "Mark A set here." in await say(port, 10, "/mark A")
        assert [data["name"] for method, data in port.notes if method == "liminal/mark"] == ["A"]
        assert list(manager.model.marks_of(THREAD)) == ["A"]  # in flight: the thread model's
        assert "cleared back to mark A" in await say(port, 11, "/clear A")
    assert port.backing_of(THREAD) != THREAD


async def test_a_command_while_a_prompt_runs_changes_nothing(tmp_path: Path) -> None:
    async with kernel(tmp_path, commands=True) as (port, _):
        port.from_client(prompt(10, "a long one"))  # not answered yet
        text = await say(port, 11, "/undo")
    assert "a prompt is running" in text and "nothing changed" in text
    assert port.backing_of(THREAD) == THREAD and not port.is_held(THREAD)


OTHER = "9b1f3a55-2c41-4c6e-9a57-0d6f2f4f0e22"
NO_CLOSE = {"loadSession": True, "sessionCapabilities": {"resume": {}}}  # the recycle's agent


class GatedHarness(CuttingHarness):
    """Rewrites of the sessions named in ``gates`` wait for their gate; ``entered`` says whose
    rewrite has started."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.gates: dict[str, threading.Event] = {}
        self.entered: list[str] = []

    def rewrite(self, path: Path, target_tokens: int, new_id: str, *, memos: Any = (), **_: Any) -> Rewritten:
        self.entered.append(path.stem)
        gate = self.gates.get(path.stem)
        if gate is not None:
            gate.wait(10)
        return super().rewrite(path, target_tokens, new_id)


def open_other(port: FakePort) -> None:
    """A second thread, opened and prompted once (20k tokens: no swap)."""
    port.from_client(request(20, "session/new", cwd="/work", mcpServers=[]))
    port.from_agent(answered(20, {"sessionId": OTHER}))
    port.from_client(request(21, "session/prompt", sessionId=OTHER, prompt=[{"type": "text", "text": "hi"}]))
    port.from_agent({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": OTHER, "update": {"sessionUpdate": "usage_update", "used": 20_000, "size": 200_000}}},
        answered(21, {"stopReason": "end_turn"}))


async def until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not check():  # noqa: ASYNC110 - no event for it
            await anyio.sleep(0.005)


async def test_two_threads_move_at_once(tmp_path: Path) -> None:
    """The move lock is the thread's: a swap of one thread commits while a command's move of
    another is still writing. On main one lock served every thread, and the swap waited for
    the command (here, for ever: the command waits for the swap to be done)."""
    harness = GatedHarness(tmp_path)
    gate = harness.gates[OTHER] = threading.Event()
    recycler: list[Recycler] = []
    async with kernel(tmp_path, commands=True, harness=harness, caps=NO_CLOSE, recycler=recycler) \
            as (port, manager):
        open_other(port)
        port.from_client(request(30, "session/prompt", sessionId=OTHER,
                                 prompt=[{"type": "text", "text": "/optimise"}]))
        await until(lambda: OTHER in harness.entered)  # the command's move of OTHER is writing
        port.from_client(prompt(4, "second"))
        port.from_agent(usage(130_000), answered(4, {"stopReason": "end_turn"}))
        with anyio.fail_after(5):
            await manager.wait_for_swaps(1)
        assert port.backing_of(THREAD) != THREAD and not port.is_held(THREAD)
        assert port.backing_of(OTHER) == OTHER and port.is_held(OTHER)  # still moving
        # The swap's quiet moment found a session to recycle (no close: the one it left), but
        # not every thread's move lock: the recycle waits for the next moment, no attempt.
        assert recycler[0].stale > recycler[0].max_stale and recycler[0].failed == 0
        gate.set()
        await until(lambda: any(m.get("id") == 30 for m in port.to_client))
    assert port.backing_of(OTHER) != OTHER and not port.is_held(OTHER)
    assert sorted(r.outcome for r in manager.journal.records()) == ["committed", "committed"]


async def test_a_command_and_a_swap_of_one_thread_take_turns(tmp_path: Path) -> None:
    """One move of a thread at a time. While the thread's swap writes, the model's /undo (its
    ``slash`` tool, which no hold stops) waits for the thread's move lock, and the /undo the
    person types waits in the swap's hold; each runs once the move before it is done, from the
    session that move left."""
    harness = GatedHarness(tmp_path)
    gate = harness.gates[THREAD] = threading.Event()
    async with kernel(tmp_path, commands=True, harness=harness) as (port, manager):
        [center] = [c for c in port.components if isinstance(c, CommandCenter)]
        port.from_client(prompt(4, "second"))
        port.from_agent(usage(130_000), answered(4, {"stopReason": "end_turn"}))
        await until(lambda: THREAD in harness.entered)
        assert manager.model.moves.taken(THREAD)
        center.slash_requested(SlashRequest(THREAD, "undo", "", tmp_path / "slash"))
        port.from_client(prompt(10, "/undo"))  # typed: waits in the hold
        await anyio.wait_all_tasks_blocked()  # both are waiting: for the lock, in the hold
        assert not any(method == "liminal/slash" for method, _ in port.notes)
        assert not any(m.get("id") == 10 for m in port.to_client)
        assert port.backing_of(THREAD) == THREAD
        assert [r.outcome for r in manager.journal.records(begins=True)] == ["begin"]  # the swap's
        gate.set()
        await until(lambda: any(m.get("id") == 10 for m in port.to_client))
    [slash] = [data for method, data in port.notes if method == "liminal/slash"]
    assert slash["ok"], slash
    assert not port.is_held(THREAD)
    records = manager.journal.records(begins=True)
    # Each move begun after the one before it ended, from the session it left.
    assert [(r.outcome, r.move) for r in records] == [
        ("begin", "swap"), ("committed", "swap"), ("begin", "/undo"), ("committed", "/undo"),
        ("begin", "/undo"), ("committed", "/undo")], records
    assert records[2].old_backing_id == records[1].new_backing_id
    assert records[4].old_backing_id == records[3].new_backing_id
    assert records[5].new_backing_id == port.backing_of(THREAD)


async def test_the_agent_restart_waits_for_every_threads_move(tmp_path: Path) -> None:
    """The agent restart opens every live thread on a new process: not while one is moving
    (its move fails with the dead agent, and ends first)."""
    recycler: list[Recycler] = []
    started: list[int] = []
    restarted: list[bool] = []

    async def start_agent() -> Any:
        started.append(1)
        raise OwnRequestError("start", "a fake port starts no process")

    async with kernel(tmp_path, recycler=recycler) as (port, manager):
        port.start_agent = start_agent  # type: ignore[method-assign]
        assert recycler[0].live == [THREAD] and manager.model.moves.try_take([THREAD])  # a move

        async def restart() -> None:
            restarted.append(await recycler[0].restart_agent(port, 1))

        async with anyio.create_task_group() as tg:
            tg.start_soon(restart)
            await anyio.sleep(0.05)
            assert started == []
            manager.model.moves.give([THREAD])  # the move ended
    assert started == [1] and restarted == [False] and not manager.model.moves.taken()


async def test_the_move_locks_take_threads_together_or_not_at_all() -> None:
    locks = MoveLocks()
    assert locks.try_take(["a"]) and not locks.try_take(["b", "a"]) and not locks.taken("b")
    order: list[str] = []

    async def everything() -> None:  # the recycle: every thread, once none is moving
        async with locks.moving("a", "b"):
            order.append("all")

    async with anyio.create_task_group() as tg:
        tg.start_soon(everything)
        await anyio.wait_all_tasks_blocked()  # it is waiting for the lock
        assert order == [] and not locks.taken("b")  # waits, holding nothing
        async with locks.moving("b"):
            order.append("b")
        locks.give(["a"])
    assert order == ["b", "all"] and not locks.taken()


def test_the_kernel_imports_neither_the_proxy_nor_the_transport() -> None:
    """The kernel acts through the port: on main six kernel files imported ``Proxy`` (under
    ``TYPE_CHECKING`` too, which is still a layer the kernel leans on) and the recycle started
    agent processes with ``liminal.transport.legs``."""
    import ast

    import liminal.kernel

    root = Path(liminal.kernel.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.name}: {name}" for name in names
                      if name.startswith(("liminal.proxy", "liminal.transport"))]
    assert found == []
