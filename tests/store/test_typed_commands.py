"""The commands a person types that read and write the store, as the command center answers them
(``liminal.kernel.commands``): ``/recall``, ``/memo``, ``/memos``, ``/rename``, ``/archive``, on
every store. Each prompt goes through the router's hook to the command center and back as the
client would see it (an ``agent_message_chunk`` and the prompt's answer); a bad argument is
answered and changes nothing, and the answer of a command that could have changed something
ends in "(nothing changed)" (of one that only reads, ``/recall``, ``/memos``, ``/marks``,
``/context``, it would say nothing). (``/search``:
``test_search_conversation.py``; the same commands with the real Claude Code:
``tests/acceptance/test_commands.py``.)
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import orjson
import pytest

from liminal.acp.router import Router
from liminal.ingest.indexer import Indexer
from liminal.kernel.aids import CommandAids, Preamble
from liminal.kernel.commands import CommandCenter
from liminal.kernel.threads import ThreadModel
from liminal.lookup.memos import MEMO_THREAD
from liminal.lookup.threadlist import listing
from liminal.store.base import Store
from liminal.store.records import Batch, ThreadUpdate
from tests.store.conftest import event
from tests.support.fakeport import FakePort

pytestmark = pytest.mark.anyio
ONE = "7a1b2c3d-0000-4000-8000-000000000001"
TWO = "7a1b2c3d-0000-4000-8000-000000000002"


class Typist:
    """A client typing prompts at the command center through the router's hooks."""

    def __init__(self, center: CommandCenter) -> None:
        self.router = Router(max_frame_bytes=1 << 20)
        for methods, hook in center.request_hooks():
            self.router.add_request_hook(methods, hook)
        self.center = center
        self.port = FakePort(self.router)
        self.center.context.mover = SimpleNamespace(port=self.port)  # type: ignore[assignment]
        self._ids = itertools.count(100)

    async def type(self, thread: str, text: str) -> str:
        """The text liminal answers a prompt with; the prompt ends with ``end_turn``."""
        rpc_id = next(self._ids)
        self.router.receive_from_client(orjson.dumps({
            "jsonrpc": "2.0", "id": rpc_id, "method": "session/prompt",
            "params": {"sessionId": thread, "prompt": [{"type": "text", "text": text}]}}) + b"\n", 0)
        out = self.router.take()
        assert out.to_agent == [], "a command never reaches the agent"
        for local in out.local:
            self.center.local_requested(local)
        said, answer = "", None
        with anyio.fail_after(20):
            while answer is None:
                await anyio.sleep(0.005)
                said_now, self.port.to_client[:] = list(self.port.to_client), []
                for message in said_now:
                    if message.get("id") == rpc_id:
                        answer = message
                    elif message.get("method") == "session/update":
                        said += message["params"]["update"]["content"]["text"]
        assert answer == {"jsonrpc": "2.0", "id": rpc_id, "result": {"stopReason": "end_turn"}}, answer
        return said


@contextlib.contextmanager
def no_store_opened_twice(store: Store) -> Iterator[Any]:
    @contextlib.asynccontextmanager
    async def open_store() -> AsyncIterator[Store]:
        yield store  # the test's store, closed by its fixture

    yield open_store


@contextlib.asynccontextmanager
async def typist(store: Store, harness: Any = None, memory: Any = None) -> AsyncIterator[Typist]:
    """``memory``: made of the center's store (``liminal.kernel.memory.Memory``), if given."""
    with no_store_opened_twice(store) as opener:
        # The scratchpad reads through the center's store, as the wiring's does.
        aids = CommandAids(Preamble(memory(lambda: center.store()))) if memory is not None else None
        center = CommandCenter(ThreadModel(), None, None, None, harness, opener, aids=aids)  # type: ignore[arg-type]
        typing = Typist(center)
        async with anyio.create_task_group() as tg:
            tg.start_soon(center.run, typing.port)
            try:
                yield typing
            finally:
                tg.cancel_scope.cancel()
                await center.aclose()


async def opened(store: Store, thread: str, t0: float, spool: Path) -> None:
    """The thread as the index worker records it: the client opened it and said something."""
    indexer = Indexer(store, spool / "spool")
    frames = [
        event("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                      "params": {"cwd": "/work/demo", "mcpServers": []}}, time=t0),
        event("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": thread}}, thread=thread,
              method="session/new", time=t0 + 1),
        event("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": thread, "prompt": [{"type": "text", "text": "the flux capacitor, again"}]}},
            time=t0 + 2),
        event("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": thread, "update": {"sessionUpdate": "session_info_update",
                                            "title": "Capacitor work"}}}, time=t0 + 3),
        event("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}},
              thread=thread, method="session/prompt", time=t0 + 4)]
    for frame in frames:
        indexer.offer(frame)
    await indexer.aclose()


async def reopened_and_closed(store: Store, thread: str, t0: float, spool: Path) -> None:
    """What a person's editor does next: it loads the thread again (a restart), then closes it."""
    indexer = Indexer(store, spool / "spool")
    for frame in (
            event("c2a", {"jsonrpc": "2.0", "id": 7, "method": "session/load",
                          "params": {"sessionId": thread, "cwd": "/work/demo", "mcpServers": []}}, time=t0),
            event("a2c", {"jsonrpc": "2.0", "id": 7, "result": {}}, thread=thread,
                  method="session/load", time=t0 + 1),
            event("c2a", {"jsonrpc": "2.0", "id": 8, "method": "session/close",
                          "params": {"sessionId": thread}}, time=t0 + 2),
            event("a2c", {"jsonrpc": "2.0", "id": 8, "result": {}}, thread=thread,
                  method="session/close", time=t0 + 3)):
        indexer.offer(frame)
    await indexer.aclose()


def listed(threads: list[Any]) -> list[str]:
    """What ``session/list`` answers of the store's threads (``liminal.lookup.threadlist``)."""
    return [s["sessionId"] for s in listing(threads, [], lambda b: b, None, first_page=True,
                                            hide=set(), live={})]


async def test_a_memo_kept_in_one_thread_is_found_from_another(store: Store) -> None:
    async with typist(store) as typing:
        assert await typing.type(ONE, "/memo  deploys need the VPN #ops #deploy ") == \
            "Memo kept with #ops #deploy."
        assert await typing.type(ONE, "/memo the build is slow on Mondays") == "Memo kept."
        for bad in ("/memo", "/memo #ops #deploy", "/memo   "):
            assert await typing.type(ONE, bad) == "/memo TEXT #tag (nothing changed)", bad
        # Another thread finds them: by tag, by words (any case), both, or all of them.
        assert await typing.type(TWO, "/memos #ops") == "- deploys need the VPN  #ops #deploy"
        assert await typing.type(TWO, "/memos vpn") == "- deploys need the VPN  #ops #deploy"
        assert await typing.type(TWO, "/memos #deploy #ops VPN") == "- deploys need the VPN  #ops #deploy"
        assert await typing.type(TWO, "/memos") == ("- deploys need the VPN  #ops #deploy\n"
                                                    "- the build is slow on Mondays")
        assert await typing.type(TWO, "/memos #nothing") == "No memos found."
        assert await typing.type(TWO, "/memos #ops Mondays") == "No memos found."
    memos = await store.messages(MEMO_THREAD)
    assert [(m.text, m.data["tags"], m.data["thread"]) for m in memos] == [
        ("deploys need the VPN", ["ops", "deploy"], ONE), ("the build is slow on Mondays", [], ONE)]
    # The memos' pseudo-thread is no thread of the person's.
    assert MEMO_THREAD not in [s.thread.id for s in await store.threads(empty=True)]


async def test_rename_names_the_thread_for_both_lists(store: Store, tmp_path: Path) -> None:
    await opened(store, ONE, 1000.0, tmp_path)
    async with typist(store) as typing:
        for bad in ("/rename", "/rename  \t "):
            assert await typing.type(ONE, bad) == "/rename TITLE (nothing changed)"
        thread = await store.thread(ONE)
        assert thread is not None and thread.title == "Capacitor work"
        assert await typing.type(ONE, "/rename   Flux \t work ") == "Thread renamed: Flux work"
    # The agent titling the thread's session later does not undo the person's name.
    await store.write(Batch(threads=[ThreadUpdate(ONE, 2000.0, title="Something the CLI chose")]))
    [summary] = await store.threads()
    assert (summary.thread.title, summary.thread.named) == ("Flux work", True)
    assert listed(await store.threads()) == [ONE]


async def test_archive_hides_the_thread_from_both_lists_and_it_stays_hidden(store: Store, tmp_path: Path) -> None:
    """Archived, the thread goes on working, and nothing but the person brings it back: on main
    the editor loading it again (a restart) made it "active", its closing it "closed", and it
    was listed again."""
    await opened(store, ONE, 1000.0, tmp_path)
    await opened(store, TWO, 1100.0, tmp_path)
    async with typist(store) as typing:
        for bad in ("/archive now", "/archive ONE"):
            assert await typing.type(ONE, bad) == "/archive takes no arguments (nothing changed)"
        assert {s.thread.id: s.thread.state for s in await store.threads()} == {ONE: "active", TWO: "active"}
        assert (await typing.type(ONE, "/archive")).startswith("Thread archived")
    state = {s.thread.id: s.thread.state for s in await store.threads()}
    assert state == {ONE: "archived", TWO: "active"}
    assert listed(await store.threads()) == [TWO]
    await reopened_and_closed(store, ONE, 2000.0, tmp_path)
    await reopened_and_closed(store, TWO, 2100.0, tmp_path)
    state = {s.thread.id: s.thread.state for s in await store.threads()}
    assert state == {ONE: "archived", TWO: "closed"}
    assert listed(await store.threads()) == [TWO]
    # liminal threads unarchive: the person's word brings it back.
    await store.write(Batch(threads=[ThreadUpdate(ONE, 3000.0, state="active", by_user=True)]))
    assert sorted(listed(await store.threads())) == sorted([ONE, TWO])


async def test_every_command_that_takes_no_arguments_refuses_them(store: Store) -> None:
    """``/archive now`` archived the thread (its words ignored), as ``/marks all``,
    ``/context please`` and ``/optimise hard`` ran as if typed alone: a person who typed more
    than the command is told, and nothing happens."""
    async with typist(store) as typing:
        for name in ("archive", "optimise", "undo"):
            assert await typing.type(ONE, f"/{name} extra words") == \
                f"/{name} takes no arguments (nothing changed)", name
        # A command that only reads does not say it changed nothing (nothing could change).
        assert await typing.type(ONE, "/marks extra words") == "/marks takes no arguments"
        # /context takes one word (issue 24's rebuild), and says so.
        assert await typing.type(ONE, "/context please") == ("/context shows the context; /context "
                                                             "rebuild writes the state anchor again")
    assert await store.threads(empty=True) == []


async def test_recall_answers_the_bytes_behind_a_key(store: Store, tmp_path: Path) -> None:
    from liminal.gradient.recall import RecallKey
    from liminal.lookup.recaller import Recaller
    from tests.store.test_recall_lineage import claude_thread, keys_in

    lineage, env = claude_thread(tmp_path)
    key = keys_in(lineage.current)[0]
    expected = await Recaller(None, None, env).recall(str(key))
    assert len(expected) > 100
    async with typist(store, lineage.harness) as typing:
        assert (await typing.type(ONE, f"/recall {key}")).encode() == expected
        assert await typing.type(ONE, "/recall") == "/recall KEY (from a truncation marker)"
        assert await typing.type(ONE, "/recall ../../etc/passwd:x:0") == \
            "not a recall key: '../../etc/passwd:x:0'"
        # Said once, the key first (it was "'KEY': KEY: ...").
        unknown = RecallKey("11111111-1111-4111-8111-111111111111", key.uuid, 0)
        assert await typing.type(ONE, f"/recall {unknown}") == \
            f"{unknown}: neither the store nor a session file has it"
        no_block = RecallKey(key.session_id, key.uuid, 99)
        assert await typing.type(ONE, f"/recall {no_block}") == f"{no_block}: record has no block 99"
