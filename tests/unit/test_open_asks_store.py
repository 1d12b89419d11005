"""A client's load or resume is decided after asking the store where the thread is (issue 23:
"a thread opens wherever the store is"), with literal frames over a bare router
(``liminal.kernel.commands.CommandCenter._open``, ``liminal.kernel.whereabouts.ask_store``).

Here the thread ``T`` is bound to ``X`` (this liminal's journal) and ``X`` has a file on this
machine. A sidecar on another host moved it on to ``Y``: the store's lineage is ``T, X, Y``.
Forwarded as it came, the load opened the thread silently on ``X``'s older context."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import orjson
import pytest

from liminal.acp.router import Router
from liminal.kernel import whereabouts
from liminal.kernel.commands import CommandCenter
from liminal.kernel.threads import ThreadModel
from tests.support.fakeport import FakePort

pytestmark = pytest.mark.anyio
LOAD = {"jsonrpc": "2.0", "id": 7, "method": "session/load",
        "params": {"sessionId": "T", "cwd": "/work/demo", "mcpServers": []}}


class _Store:
    moves = None  # not a shared store: the lineage is the index's alone (journal23b's place aside)

    def __init__(self, *lineage: str, hang: bool = False, fail: bool = False,
                 meanwhile: Callable[[], None] | None = None) -> None:
        self.lineage, self.hang, self.fail, self.meanwhile = lineage, hang, fail, meanwhile

    async def thread(self, thread: str) -> Any:
        if self.meanwhile is not None:  # what happens here while the store is asked
            self.meanwhile()
        if self.hang:
            await anyio.sleep_forever()
        if self.fail:
            raise ConnectionError("the store is down")
        return SimpleNamespace(backing_ids=self.lineage, state="active") if self.lineage else None

    async def messages(self, thread: str, **kwargs: Any) -> list[Any]:
        return []


class _Harness:
    name = "claude"

    def __init__(self, *files: str) -> None:
        self.files = set(files)

    def locate(self, backing: str, cwd: str | None) -> Path | None:
        return Path(f"/work/demo/{backing}.jsonl") if backing in self.files else None


class _Journal:
    def opened_empty(self, thread: str, backing: str) -> bool:
        return False


async def _opened(store: _Store | None, harness: _Harness, *, wait: float = 5.0,
                  model: ThreadModel | None = None, shared: Any = None) -> FakePort:
    """The load of ``T`` through the command center, T bound to X; the port once it is answered
    or forwarded. ``shared``: the mover's store journal (issue 23's shared store)."""
    @contextlib.asynccontextmanager
    async def open_store() -> AsyncIterator[Any]:
        yield store

    model = model or ThreadModel()
    model.capabilities = {"loadSession": True}
    router = Router(max_frame_bytes=1 << 20, replay_from_store=True)
    mover = SimpleNamespace(port=None, threads=model.threads, shared=shared, leases=None)
    center = CommandCenter(model, mover, _Journal(), None, harness=harness,  # type: ignore[arg-type]
                           open_store=open_store if store is not None else None)

    def answer(method: str, params: dict[str, Any]) -> Any:
        return {"modes": None}

    port = FakePort(router, [center], answer=answer)
    mover.port = port
    port.bind("T", "X")
    port.adopt("X", "T")
    with anyio.fail_after(wait):
        async with anyio.create_task_group() as tg:
            tg.start_soon(center.run, port)
            port.from_client(LOAD)
            while router.local_pending():  # noqa: ASYNC110 - the router has no event for it
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    return port


def _loads(port: FakePort) -> list[dict[str, Any]]:
    return [m for m in port.to_agent if m.get("method") == "session/load"]


async def test_a_store_further_along_binds_the_thread_to_its_session_though_an_old_file_is_here() -> None:
    port = await _opened(_Store("T", "X", "Y"), _Harness("T", "X", "Y"))
    [load] = _loads(port)
    assert load["params"]["sessionId"] == "Y" and str(load["id"]).startswith("liminal-")
    assert port.backing_of("T") == "Y" and port.thread_of("X") == "T"
    [answer] = [m for m in port.to_client if m.get("id") == 7]
    assert answer["result"].get("modes", "absent") is None  # the agent's answer, under T
    assert ("liminal/restored", {"backing_id": "Y", "cwd": "/work/demo", "harness": "claude",
                                 "written": True}) in port.notes


async def test_a_store_further_along_writes_the_session_it_has_no_file_of_here() -> None:
    """As before: the file is missing, the store has it (the stub cannot write it, which the
    load logs; the agent says what it says)."""
    port = await _opened(_Store("T", "X", "Y"), _Harness("T", "X"))
    assert [m["params"]["sessionId"] for m in _loads(port)] == ["Y"]


async def test_a_store_with_nothing_newer_lets_the_load_go_on_as_the_clients_own() -> None:
    """Rule 8 included: the thread is moved (T on X), so the agent's replay is captured and
    the answer parked for the store's history."""
    port = await _opened(_Store("T", "X"), _Harness("T", "X"))
    [load] = _loads(port)
    assert load == {**LOAD, "params": {**LOAD["params"], "sessionId": "X"}}  # the client's id, X for T
    assert port.backing_of("T") == "X"
    assert port.router._captured == {"X"}  # the agent's replay of X is the compressed one
    assert not [m for m in port.to_client if m.get("id") == 7]  # the agent answers it


@pytest.mark.parametrize("store", [_Store(fail=True), _Store(), _Store("Q", "R")],
                         ids=["down", "knows-nothing", "another-lineage"])
async def test_a_store_that_cannot_say_leaves_the_local_view(store: _Store) -> None:
    port = await _opened(store, _Harness("T", "X"))
    assert [(m["id"], m["params"]["sessionId"]) for m in _loads(port)] == [(7, "X")]


async def test_a_store_that_does_not_answer_in_time_leaves_the_local_view(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(whereabouts, "STORE_WAIT_SECONDS", 0.2)
    t = time.monotonic()
    port = await _opened(_Store("T", "X", "Y", hang=True), _Harness("T", "X"), wait=5)
    assert time.monotonic() - t < 4  # bounded: not the store's own timeout
    assert [(m["id"], m["params"]["sessionId"]) for m in _loads(port)] == [(7, "X")]
    assert port.backing_of("T") == "X"  # and its late answer, if any, binds nothing


class _StalledJournal:
    """A shared store's journal that accepts the question and never answers (a MongoDB whose
    socket stalls: up to its 120 s timeout)."""

    async def abandon_dead(self, thread: str, *, lease_gone: bool = False) -> None:
        await anyio.sleep_forever()

    async def records(self, thread: str) -> list[Any]:
        await anyio.sleep_forever()
        return []


async def test_a_shared_store_that_stalls_holds_a_load_no_longer_than_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The review of the merge: with a shared store, a load waited for the dead-move check, then
    for the question, then, unbounded, for the journal's word on an empty session: B loading a
    thread A moved (no file of the new session here) hung on a stalled store."""
    monkeypatch.setattr(whereabouts, "STORE_WAIT_SECONDS", 0.2)
    t = time.monotonic()
    port = await _opened(_Store("T", "X", "Y"), _Harness("T", "X"), shared=_StalledJournal(), wait=5)
    assert time.monotonic() - t < 4
    assert [m["params"]["sessionId"] for m in _loads(port)] == ["Y"]  # opened where the store has it


async def test_a_thread_this_liminal_began_moving_while_the_store_was_asked_is_not_bound_by_it() -> None:
    """The store's place may be this liminal's own move, committed while the load waited: the
    thread is not taken for one another sidecar moved, and the load goes on as the client's."""
    from liminal.kernel.threads import ThreadState

    model = ThreadModel()
    model.threads["T"] = ThreadState("T")

    def a_swap_begins() -> None:
        model.threads["T"].swap.swapping = True

    port = await _opened(_Store("T", "X", "Y", meanwhile=a_swap_begins), _Harness("T", "X"), model=model)
    assert port.backing_of("T") == "X"  # the mover binds it when it releases the thread
    assert [(m["id"], m["params"]["sessionId"]) for m in _loads(port)] == [(7, "X")]


async def test_without_a_store_a_load_of_a_thread_with_its_file_is_not_kept() -> None:
    port = await _opened(None, _Harness("T", "X"))
    assert [(m["id"], m["params"]["sessionId"]) for m in _loads(port)] == [(7, "X")]


# -- the commands that act on the context where this liminal has the thread ---------------------


class _Mover:
    def __init__(self) -> None:
        self.port: Any = None
        self.threads: dict[str, Any] = {}
        self.moves: list[str] = []

    async def move_thread(self, thread: str, reason: str, plan: Any) -> Any:
        from liminal.kernel.mover import SwapError

        self.moves.append(reason)
        raise SwapError("moved by the stub")


async def _command(store: _Store, text: str, method: str = "session/prompt") -> tuple[FakePort, _Mover]:
    """``text`` typed in T (bound to X here); the port once it is answered, and the mover."""
    from liminal.kernel.rewind import Rewinder

    @contextlib.asynccontextmanager
    async def open_store() -> AsyncIterator[Any]:
        yield store

    model = ThreadModel()
    mover = _Mover()
    center = CommandCenter(model, mover, _Journal(), None, harness=_Harness("T", "X"),  # type: ignore[arg-type]
                           open_store=open_store)
    rewinder = Rewinder(model, mover, _Harness("T", "X"), open_store)  # type: ignore[arg-type]
    port = FakePort(Router(max_frame_bytes=1 << 20), [center, rewinder])
    mover.port = port
    port.bind("T", "X")
    params: dict[str, Any] = {
        "session/prompt": {"sessionId": "T", "prompt": [{"type": "text", "text": text}]},
        "session/rewind": {"sessionId": "T", "toMessageId": text},
        "session/fork": {"sessionId": "T", "cwd": "/work/demo", "mcpServers": []}}[method]
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(center.run, port)
            tg.start_soon(rewinder.run, port)
            port.from_client({"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
            while port.router.local_pending():  # noqa: ASYNC110 - the router has no event for it
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    return port, mover


def _said(port: FakePort) -> str:
    return "".join(m["params"]["update"]["content"]["text"] for m in port.to_client
                   if m.get("method") == "session/update")


@pytest.mark.parametrize("command", ["/undo", "/clear", "/clear M", "/fork", "/optimise"])
async def test_a_context_command_on_a_thread_moved_elsewhere_since_is_refused(command: str) -> None:
    port, mover = await _command(_Store("T", "X", "Y"), command)
    text = _said(port)
    assert "moved this thread on (to session Y)" in text and "load the thread again" in text, text
    assert text.endswith("(nothing changed)") and mover.moves == [] and port.backing_of("T") == "X"


async def test_a_context_command_the_store_agrees_with_goes_on() -> None:
    port, mover = await _command(_Store("T", "X"), "/undo")
    assert mover.moves == ["/undo"], _said(port)


async def test_a_rewind_on_a_thread_moved_elsewhere_since_is_refused() -> None:
    port, mover = await _command(_Store("T", "X", "Y"), "m-1", method="session/rewind")
    [answer] = [m for m in port.to_client if m.get("id") == 9]
    assert "load the thread again" in answer["error"]["message"] and mover.moves == [], answer


async def test_liminals_session_fork_of_a_thread_moved_elsewhere_since_is_refused() -> None:
    port, _ = await _command(_Store("T", "X", "Y"), "", method="session/fork")
    [answer] = [m for m in port.to_client if m.get("id") == 9]
    assert "load the thread again" in answer["error"]["message"], answer


def test_a_load_kept_then_passed_on_leaves_nothing_for_the_index_to_wait_for() -> None:
    """The kept load is tapped as the client's to liminal (``c2l``), then as the client's to the
    agent (``c2a``), whose answer comes ``a2c``: the index worker's deriver remembered the first
    for an ``l2c`` answer that never comes, one entry per load for as long as it runs."""
    from liminal.acp.router import LOCAL
    from liminal.ingest.derive import Deriver
    from liminal.ingest.indexer import to_record

    router = Router(max_frame_bytes=1 << 20)
    router.add_request_hook(("session/load",), lambda method, message, thread: LOCAL)
    deriver = Deriver()
    seq = 0

    def index() -> None:
        nonlocal seq
        for event in router.take().events:
            deriver.feed(to_record(seq, event), event.message)
            seq += 1

    router.receive_from_client(orjson.dumps(LOAD) + b"\n", time.time())
    [kept] = router.local_pending()
    index()
    router.forward_local(kept, "session/load", dict(LOAD["params"]))
    router.receive_from_agent(b'{"jsonrpc":"2.0","id":7,"result":{}}\n', time.time())
    index()
    assert deriver._requests == {}
