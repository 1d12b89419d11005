"""The command center's own edges, without an agent: which prompts are liminal's commands, and a
``session/list`` the agent fails to answer (``liminal.kernel.commands``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from liminal.acp.router import Router
from liminal.kernel.aids import CommandAids
from liminal.kernel.commands import COMMANDS, CommandCenter, CommandError, parse, table
from liminal.kernel.commands.table import run_command
from liminal.kernel.threads import ThreadModel
from tests.support.fakeport import FakePort

WHITESPACE = st.sampled_from([" ", "\t", "\n", "\xa0", "  ", " \n "])


@given(st.text())
def test_any_text_parses_or_is_not_a_command(text: str) -> None:
    found = parse(text)
    assert found is None or (found[0] in COMMANDS and found[1] == found[1].strip())


@given(st.sampled_from(sorted(COMMANDS)), WHITESPACE, st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True),
       WHITESPACE)
def test_any_whitespace_ends_the_commands_name(name: str, gap: str, arg: str, tail: str) -> None:
    """"/mark\\tA" is /mark A: never a prompt for the CLI (a "/clear\\nA" would be its own /clear)."""
    assert parse(f"/{name}{gap}{arg}{tail}") == (name, arg)
    assert parse(f" /{name}{tail}") == (name, "")
    assert parse(f"/{gap}{name}") is None  # a slash alone is not a command
    assert parse(f"/{name}x") is None or f"{name}x" in COMMANDS  # /markA is not /mark


def _model(**threads: Any) -> ThreadModel:
    """The thread model, its agent able to list sessions."""
    model = ThreadModel()
    model.capabilities = {"sessionCapabilities": {"list": {}}}
    model.threads.update(threads)
    return model


class _Store:
    async def threads(self, limit: int, *, empty: bool = False) -> list[Any]:
        return []


class _Port(FakePort):
    """The agent's session/list never comes."""

    async def request(self, method: str, params: Any, *, timeout: float, thread_id: str | None = None) -> Any:
        raise TimeoutError  # what Proxy.request raises when the agent does not answer in time


@pytest.mark.anyio
async def test_a_session_list_the_agent_does_not_answer_is_answered_with_an_error() -> None:
    @contextlib.asynccontextmanager
    async def open_store() -> AsyncIterator[Any]:
        yield _Store()

    router = Router(max_frame_bytes=1 << 20)
    center = CommandCenter(_model(), None, None, None, harness=None, open_store=open_store)  # type: ignore[arg-type]
    for methods, hook in center.request_hooks():
        router.add_request_hook(methods, hook)
    router.receive_from_client(b'{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}\n', 0)
    for local in router.take().local:
        center.local_requested(local)
    port = _Port(router)
    with anyio.move_on_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(center.run, port)
            while router.local_pending():  # noqa: ASYNC110 - the router has no event for it
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    answers = port.to_client
    assert router.local_pending() == [] and [a["id"] for a in answers] == [5], answers
    assert "session/list failed" in answers[0]["error"]["message"]


class _Policy:
    aim = 0

    def trigger(self, pace: Any) -> int:
        return 44_168

    def target(self, pace: Any) -> int:
        return 35_762

    def bounds(self, pace: Any) -> list[str]:
        return []

    def losing_money(self, pace: Any, measured: Any) -> list[str]:
        return []

    def recent(self, pace: Any) -> int:
        return 20_000


class _Journal:
    def records(self, thread: str) -> list[Any]:
        return []


class _Thread:
    context_tokens = 12_141
    file_tokens = None
    pace = None
    cwd = "/work/demo"



class _Harness:
    def locate(self, backing: str, cwd: str | None) -> Any:
        from pathlib import Path

        return Path("/work/demo/t.jsonl")

    def bands(self, path: Any, aim: int, recent_tokens: int | None = None) -> dict[str, dict[str, int]]:
        return {"recent": {"turns": 1, "tokens": 2_854}, "middle": {"turns": 2, "tokens": 14_020},
                "old": {"turns": 0, "tokens": 0}}


class _MarksStore:
    async def messages(self, thread: str, kind: str | None = None) -> list[Any]:
        return []


@pytest.mark.anyio
async def test_context_says_its_numbers_with_units_and_nouns_in_number() -> None:
    """/context said "recent 1 turns (2,854 tokens)" and "swaps at 44,168, down to about 35,762"."""
    @contextlib.asynccontextmanager
    async def open_store() -> AsyncIterator[Any]:
        yield _MarksStore()

    # The mover's store journal: none (issue 23's shared one is in tests/integration/test_shared_journal.py).
    center = CommandCenter(_model(t=_Thread()), SimpleNamespace(shared=None), _Journal(), _Policy(),  # type: ignore[arg-type]
                           harness=_Harness(), open_store=open_store)
    center.context.port = FakePort()
    try:
        text = await run_command(center.context, "t", "context", "")
    finally:
        await center.aclose()
    assert text.splitlines()[:2] == [
        "Context: 12.1k tokens. liminal swaps at 44.2k, down to about 35.8k tokens.",
        "A swap now would keep: recent 1 turn (2.9k tokens) whole; middle 2 turns (14k tokens) with "
        "long tool output cut to recall markers."], text


@pytest.mark.anyio
async def test_context_shows_the_state_anchor_of_the_newest_summary() -> None:
    """Issue 24: what the next swap's preamble starts with is in /context once a summary is made."""
    @contextlib.asynccontextmanager
    async def open_store() -> AsyncIterator[Any]:
        yield _MarksStore()

    # The mover's store journal: none (issue 23's shared one is in tests/integration/test_shared_journal.py).
    anchors: dict[str, str] = {}
    center = CommandCenter(_model(t=_Thread()), SimpleNamespace(shared=None), _Journal(), _Policy(),  # type: ignore[arg-type]
                           harness=_Harness(), open_store=open_store, aids=CommandAids(anchor_of=anchors.get))
    center.context.port = FakePort()
    try:
        assert "State anchor" not in await run_command(center.context, "t", "context", "")
        anchors["t"] = "Goal: port 8080"
        text = await run_command(center.context, "t", "context", "")
    finally:
        await center.aclose()
    assert "State anchor (the next swap's preamble starts with it):\nGoal: port 8080" in text


def test_the_title_of_a_session_a_thread_moved_onto_never_reaches_the_client() -> None:
    """Claude Code titles each session liminal moves a thread onto after that session's first
    prompt: on main the editor's thread took the name 'gamma after clear', then 'delta after
    undo'. Titles of the thread's own session pass, and the rest of the update always does."""
    from types import SimpleNamespace

    router = Router(max_frame_bytes=1 << 20)
    mover = SimpleNamespace(port=FakePort(router))
    center = CommandCenter(_model(), mover, None, None, harness=None, open_store=None)  # type: ignore[arg-type]
    for kinds, hook in center.update_hooks():
        router.add_update_hook(kinds, hook)

    def title_update(session: str, title: str) -> dict[str, Any]:
        router.receive_from_agent(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": session, "update": {"sessionUpdate": "session_info_update", "title": title,
                                             "updatedAt": "2026-11-26T00:00:00Z"}}}).encode() + b"\n", 0)
        [line] = router.take().to_client
        update: dict[str, Any] = json.loads(line)["params"]["update"]
        return update

    assert title_update("t1", "alpha topic first prompt")["title"] == "alpha topic first prompt"
    router.bind("t1", "b1")  # a swap, /clear, /undo
    moved = title_update("b1", "gamma after clear")
    assert "title" not in moved and moved["updatedAt"] == "2026-11-26T00:00:00Z"


def _prompt(rpc_id: int, thread: str, text: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "session/prompt", "params": {
        "sessionId": thread, "prompt": [{"type": "text", "text": text}]}}).encode() + b"\n"


async def _answers(center: CommandCenter, router: Router, *lines: bytes,
                   during: Any = None) -> list[tuple[int, str]]:
    """What the client is told for each prompt, in the order the answers came."""
    port = FakePort(router)
    center.context.port = port
    for line in lines:
        router.receive_from_client(line, 0)
        for local in router.take().local:
            center.local_requested(local)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(center.run, port)
            if during is not None:
                await during(port)
            while router.local_pending():  # noqa: ASYNC110 - the router has no event for it
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    await center.aclose()
    said: dict[str, str] = {}
    out: list[tuple[int, str]] = []
    for frame in port.to_client:
        if frame.get("method") == "session/update":
            said[frame["params"]["sessionId"]] = frame["params"]["update"]["content"]["text"]
        elif "id" in frame:
            out.append((frame["id"], said.pop(next(iter(said)), "")))
    return out


def _center(rebuild: Callable[[str], Awaitable[str]] | None = None) -> tuple[CommandCenter, Router]:
    @contextlib.asynccontextmanager
    async def open_store() -> AsyncIterator[Any]:
        yield _MarksStore()

    router = Router(max_frame_bytes=1 << 20)
    center = CommandCenter(_model(t=_Thread(), u=_Thread()), None, _Journal(), _Policy(),  # type: ignore[arg-type]
                           harness=_Harness(), open_store=open_store, aids=CommandAids(rebuild_anchor=rebuild))
    for methods, hook in center.request_hooks():
        router.add_request_hook(methods, hook)
    return center, router


@pytest.mark.anyio
async def test_context_rebuild_answers_with_the_new_anchor_or_one_line_why_not() -> None:
    """Issue 24's /context rebuild: the state anchor written again now, or why not, in one line;
    every prompt answered."""
    from liminal.kernel.summaries import AnchorNotWritten

    center, router = _center()
    off = await _answers(center, router, _prompt(1, "t", "/context rebuild"), _prompt(2, "t", "/context again"))
    assert off == [
        (1, "the state anchor is written by the model's summaries, which are off (swap.summaries = true, "
            "with swaps on, turns them on) (nothing changed)"),
        (2, "/context shows the context; /context rebuild writes the state anchor again")]

    async def rebuild(thread: str) -> str:
        if thread == "u":
            raise AnchorNotWritten("the side session gave no answer within 180 s")
        return "Goal: REBUILT"

    center, router = _center(rebuild)
    said = dict(await _answers(center, router, _prompt(1, "t", "/context rebuild"), _prompt(2, "u", "/context rebuild")))
    assert said == {
        1: "State anchor written again from the current context (the next swap's preamble starts with it):\n"
           "Goal: REBUILT",
        2: "state anchor not written again: the side session gave no answer within 180 s (nothing changed)"}

    center, router = _center(rebuild)
    center.context.port = FakePort(router)
    center.context.port.prompt_in_flight = lambda thread: True  # type: ignore[method-assign]
    with pytest.raises(CommandError, match="a prompt is running: rebuild the state anchor between turns"):
        await run_command(center.context, "t", "context", "rebuild")
    await center.aclose()


@pytest.mark.anyio
async def test_a_rebuild_under_way_holds_up_no_other_command() -> None:
    """The model may take minutes to write the anchor: the queue that answers the loads, the
    lists and every other command goes on meanwhile."""
    released = anyio.Event()

    async def rebuild(thread: str) -> str:
        await released.wait()
        return "Goal: LATE"

    async def release_once_marks_answered(port: FakePort) -> None:
        while not any(f.get("id") == 2 for f in port.to_client):  # noqa: ASYNC110 - no event for it
            await anyio.sleep(0.01)
        released.set()

    center, router = _center(rebuild)
    order = await _answers(center, router, _prompt(1, "t", "/context rebuild"), _prompt(2, "u", "/marks"),
                           during=release_once_marks_answered)
    assert [rpc_id for rpc_id, _ in order] == [2, 1]
    assert dict(order)[1].endswith("Goal: LATE")


@pytest.mark.anyio
async def test_a_command_that_fails_says_what_happened_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command's failure reached the thread as ``/marks failed: TimeoutError: `` (the class's
    name and nothing after it); the model's own ``slash`` tool heard the same. What happened, in
    words (``liminal.errors.in_words``); the class goes to the log."""
    failures = {"t": TimeoutError(), "u": KeyError("thread")}

    async def failing(context: Any, thread: str, name: str, args: str) -> str:
        raise failures[thread]

    monkeypatch.setattr(table, "run_command", failing)
    center, router = _center()
    said = dict(await _answers(center, router, _prompt(1, "t", "/marks"), _prompt(2, "u", "/mark A")))
    assert said == {1: "/marks failed: no answer in time",
                    2: "/mark failed: an error inside liminal (its log has the details) (nothing changed)"}

    from liminal.mcp.link import SlashRequest

    center, router = _center()
    port = FakePort(router)
    center.context.port = port
    await table.run_slash(center.context, SlashRequest("t", "undo", "", Path("/nonexistent/slash")))
    [(_, note)] = [n for n in port.notes if n[0] == "liminal/slash"]
    assert note["said"] == "failed: no answer in time (nothing changed)", note
    await center.aclose()


class _Unreadable:
    async def appeared(self, backing: str, cwd: str | None, seconds: float) -> None:
        raise OSError("the disk went away")


@pytest.mark.anyio
async def test_every_request_the_table_keeps_is_answered_though_its_handler_fails() -> None:
    """A ``session/fork`` liminal answers (an agent without one) whose cut failed inside
    liminal: before, nothing caught it, the client's fork waited for ever and the center's
    queue stopped. A request kept by another component's hook and handed here is refused, not
    answered as a prompt."""
    from liminal.acp.router import LOCAL

    router = Router(max_frame_bytes=1 << 20)
    model = _model(t=_Thread())  # its agent lists sessions, and forks none
    mover = _Unreadable()
    center = CommandCenter(model, mover, _Journal(), _Policy(), harness=_Harness(),  # type: ignore[arg-type]
                           open_store=None)
    port = FakePort(router, [center])
    mover.port = port  # type: ignore[attr-defined]
    router.add_request_hook(("_other/kept",), lambda method, message, thread: LOCAL)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(center.run, port)
            port.from_client({"jsonrpc": "2.0", "id": 1, "method": "session/fork",
                              "params": {"sessionId": "t", "cwd": "/work/demo", "mcpServers": []}})
            router.receive_from_client(b'{"jsonrpc":"2.0","id":2,"method":"_other/kept","params":{}}\n', 0)
            for local in router.take().local:
                center.local_requested(local)
            while router.local_pending():  # noqa: ASYNC110 - the router has no event for it
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    await center.aclose()
    errors = {frame["id"]: frame["error"] for frame in port.to_client if "id" in frame}
    assert errors[1]["code"] == -32603 and errors[1]["message"].startswith("session/fork failed: "), errors
    assert errors[2]["code"] == -32601, errors
