"""``session/rewind`` and ``session/edit_prompt`` (``liminal.kernel.rewind``): where the cut ends,
the errors the RFD asks for, the capability advertised only for an agent without its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.acp import jsonrpc
from liminal.kernel.rewind import (
    ADVERTISED,
    Cut,
    Rewinder,
    RewindError,
    end_offset,
    find_cut,
    timeline,
)
from liminal.kernel.threads import ThreadModel
from liminal.store.records import MessageRecord
from tests.support.fakeport import FakePort

THREAD = "5f0c1d2e-3a4b-4c5d-8e6f-708192a3b4c5"
OTHER = "6a1b2c3d-0000-4000-8000-000000000001"


def said(n: int, *, backing: str = THREAD, command: int | None = None) -> list[MessageRecord]:
    """``n`` turns, each a user message and an agent message (turn ``command``'s prompt a
    command of liminal's, answered by liminal)."""
    out = []
    for t in range(1, n + 1):
        turn = f"c:{t:04d}0"
        text = "/mark A" if t == command else f"prompt {t}"
        out.append(MessageRecord(turn, THREAD, turn, float(t), f"{t:04d}0", "user", text, backing_id=backing))
        out.append(MessageRecord(f"c:{t:04d}1", THREAD, turn, t + 0.5, f"{t:04d}1", "agent", f"answer {t}",
                                 backing_id=backing, data={"messageId": f"msg_{t}"} if t == 2 else {}))
    return out


def is_command(text: str) -> bool:
    return text.startswith("/")


def test_a_rewind_to_an_agent_message_keeps_its_whole_turn() -> None:
    cut = find_cut(said(6), "c:00031", edit=False, is_command=is_command)
    assert (cut.backing, cut.turn, cut.turns, cut.after, cut.kept) == (THREAD, 2, 6, True, 6)
    assert cut.last is not None and cut.last.text == "answer 3"
    # The file's turns begin at these offsets: turn 3 ends where turn 4 begins.
    assert end_offset(cut, (0, 10, 20, 30, 40, 50), False, 60) == 30


def test_an_edit_ends_the_context_before_the_user_message() -> None:
    cut = find_cut(said(6), "c:00040", edit=True, is_command=is_command)
    assert (cut.turn, cut.after, cut.kept) == (3, False, 6)
    assert end_offset(cut, (0, 10, 20, 30, 40, 50), False, 60) == 30
    # A file that starts with turns liminal copied there (a swap's rewrite): counted from the end.
    assert end_offset(cut, (0, 5, 7, 10, 20, 30, 40, 50), True, 60) == 30


def test_the_agents_own_id_names_its_message_and_the_first_turn_empties_the_context() -> None:
    cut = find_cut(said(3), "msg_2", edit=False, is_command=is_command)
    assert (cut.turn, cut.after) == (1, True)
    first = find_cut(said(3), "c:00010", edit=True, is_command=is_command)
    assert first.last is None and first.kept == 0
    assert end_offset(first, (0, 10, 20), False, 30) is None  # nothing before: an empty session
    assert end_offset(first, (0, 10, 20), True, 30) == 0  # a summary before it: kept


def test_a_command_liminal_answered_is_no_turn_of_the_file() -> None:
    cut = find_cut(said(4, command=2), "c:00031", edit=False, is_command=is_command)
    assert (cut.turn, cut.turns) == (1, 3)


def test_a_prompt_refused_while_the_agent_was_gone_is_no_turn_of_the_file() -> None:
    """The router answers a prompt sent while the agent is dead itself (client to liminal): its
    words are a prompt's, but the CLI never saw it. Counted, a rewind in that session found one
    turn more than its file held and was refused."""
    messages = said(4)
    refused = {"c:00020"}  # turn 2's prompt, as the store has it (``Store.liminal_turns``)
    cut = find_cut(messages, "c:00031", edit=False, is_command=is_command, liminals=refused)
    assert (cut.turn, cut.turns) == (1, 3)
    assert end_offset(cut, (0, 10, 20), False, 30) == 20


def test_the_turn_is_counted_in_the_session_the_message_was_said_in() -> None:
    messages = [*said(2), MessageRecord("c:00030", THREAD, "c:00030", 3.0, "00030", "user", "prompt 3", backing_id=OTHER), MessageRecord("c:00031", THREAD, "c:00030", 3.5, "00031", "agent", "answer 3", backing_id=OTHER)]
    cut = find_cut(messages, "c:00031", edit=False, is_command=is_command)
    assert (cut.backing, cut.turn, cut.turns) == (OTHER, 0, 1)
    assert end_offset(cut, (0, 10, 20), True, 30) == 30


@pytest.mark.parametrize(("target", "edit", "says"), [
    ("nope", False, "unknown message id"),
    ("c:00031", True, "only a user message can be edited"),
])
def test_errors_are_invalid_params(target: str, edit: bool, says: str) -> None:
    with pytest.raises(RewindError) as caught:
        find_cut(said(6), target, edit=edit, is_command=is_command)
    assert caught.value.code == jsonrpc.INVALID_PARAMS and says in str(caught.value)


def test_a_file_with_fewer_turns_than_recorded_is_not_cut() -> None:
    with pytest.raises(RewindError):
        end_offset(Cut(THREAD, 0, 5, True, None, 0), (0, 10), False, 20)


class _Mover:
    port = None


def rewinder() -> tuple[Rewinder, FakePort]:
    model = ThreadModel()
    component = Rewinder(model, _Mover(), harness=None, open_store=None)  # type: ignore[arg-type]
    return component, FakePort(components=[model, component])


def initialize(port: FakePort, caps: dict[str, Any]) -> dict[str, Any]:
    port.from_client({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    port.from_agent({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": caps}})
    return port.to_client[-1]["result"]["agentCapabilities"]


def test_rewind_is_advertised_and_kept_for_liminal_when_the_agent_has_none() -> None:
    _component, port = rewinder()
    # Under ``_meta``: no schema has the capability; the agent's own ``_meta`` is kept.
    assert initialize(port, {"loadSession": True, "_meta": {"other": 1}}) == {
        "loadSession": True, "_meta": {"other": 1, "rewindSession": ADVERTISED}}
    port.from_client({"jsonrpc": "2.0", "id": 3, "method": "session/rewind",
                      "params": {"sessionId": THREAD, "toMessageId": "x"}})
    assert not [m for m in port.to_agent if m.get("method") == "session/rewind"]
    assert port.router.local_pending() == [3]


def test_an_agents_own_rewind_is_left_to_it() -> None:
    _component, port = rewinder()
    own = {"supported": True, "supportsEditPrompt": False}
    assert initialize(port, {"rewindSession": own}) == {"rewindSession": own}
    _component, port = rewinder()
    assert initialize(port, {"_meta": {"rewindSession": own}}) == {"_meta": {"rewindSession": own}}
    port.from_client({"jsonrpc": "2.0", "id": 3, "method": "session/edit_prompt",
                      "params": {"sessionId": THREAD, "messageId": "x", "newContent": []}})
    assert [m["method"] for m in port.to_agent if "method" in m][-1] == "session/edit_prompt"


@pytest.mark.anyio
async def test_a_request_without_its_ids_is_invalid_params(tmp_path: Path) -> None:
    component, port = rewinder()
    initialize(port, {})
    async with anyio.create_task_group() as tg:
        tg.start_soon(component.run, port)
        port.from_client({"jsonrpc": "2.0", "id": 4, "method": "session/rewind", "params": {"sessionId": THREAD}})
        port.from_client({"jsonrpc": "2.0", "id": 5, "method": "session/edit_prompt",
                          "params": {"sessionId": THREAD, "messageId": "m"}})
        with anyio.fail_after(5):
            while len([m for m in port.to_client if m.get("id") in (4, 5)]) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    errors = {m["id"]: m["error"] for m in port.to_client if m.get("id") in (4, 5)}
    assert errors[4]["code"] == errors[5]["code"] == jsonrpc.INVALID_PARAMS
    assert "toMessageId" in errors[4]["message"] and "newContent" in errors[5]["message"]


def test_a_replay_leaves_out_what_a_rewind_and_then_an_edit_cut_off() -> None:
    messages = said(6)
    rewind = MessageRecord("c:00065", THREAD, None, 6.7, "00065", "swap", status="committed",
                           data={"move": "rewind c:00031", "outcome": "committed"})
    after = [MessageRecord("c:00070", THREAD, "c:00070", 7.0, "00070", "user", "golf"),
             MessageRecord("c:00071", THREAD, "c:00070", 7.5, "00071", "agent", "answer golf")]
    edit = MessageRecord("c:00075", THREAD, None, 7.7, "00075", "swap", status="committed",
                         data={"move": "edit c:00040", "outcome": "committed"})
    edited = [MessageRecord("c:00080", THREAD, "c:00080", 8.0, "00080", "user", "edited"),
              MessageRecord("c:00081", THREAD, "c:00080", 8.5, "00081", "agent", "answer edited")]
    shown = [m.text for m in timeline([*messages, rewind, *after]) if m.kind != "swap"]
    assert shown == [m.text for m in messages[:6]] + ["golf", "answer golf"]
    shown = [m.text for m in timeline([*messages, rewind, *after, edit, *edited]) if m.kind != "swap"]
    assert shown == [m.text for m in messages[:6]] + ["edited", "answer edited"]


def test_an_id_from_the_agents_replay_of_a_thread_that_never_moved_names_the_live_turn() -> None:
    """After a restart, a thread liminal never moved is replayed by the agent, with the agent's
    ids (Claude Code's record uuids) or new ones: they name the live turn at the same place."""
    live = said(4)
    replay = []
    for t in range(1, 5):
        replay.append(MessageRecord(f"load:{t:04d}0", THREAD, None, 9.0 + t, f"9{t:04d}0", "user", f"prompt {t}",
                                    replayed=True, data={"messageId": f"uuid-{t}"}, backing_id=THREAD))
        replay.append(MessageRecord(f"load:{t:04d}1", THREAD, None, 9.5 + t, f"9{t:04d}1", "agent", f"answer {t}",
                                    replayed=True, backing_id=THREAD))
    cut = find_cut(live + replay, "uuid-3", edit=True, is_command=is_command)
    assert (cut.turn, cut.after) == (2, False)
    cut = find_cut(live + replay, "load:00021", edit=False, is_command=is_command)
    assert (cut.turn, cut.after) == (1, True) and cut.last is not None and cut.last.id == "c:00021"


def test_an_id_from_a_later_loads_replay_is_found_by_its_note() -> None:
    """A load of a thread the store has stores no replay, only its note (``records.LOAD``): the
    ids the client was given, in order (the agent's, or the frames' liminal stamped). They name
    the live turn at the same place."""
    live = said(4)
    listed: list[list[str]] = []
    for t in range(1, 5):
        listed += [["user", f"uuid-{t}"], ["agent", f"load:{t:04d}1"]]
    note = MessageRecord(f"load:{THREAD}", THREAD, None, 9.0, "9", "load", data={"said": listed},
                         backing_id=THREAD)
    cut = find_cut([*live, note], "uuid-3", edit=True, is_command=is_command)
    assert (cut.turn, cut.after) == (2, False)
    cut = find_cut([*live, note], "load:00021", edit=False, is_command=is_command)
    assert (cut.turn, cut.after) == (1, True) and cut.last is not None and cut.last.id == "c:00021"
    with pytest.raises(RewindError):
        find_cut([*live, note], "no-such-id", edit=False, is_command=is_command)


class _LaggingStore:
    """A store whose index is behind the frames: the last turn, and the request's own frame, are
    stored only once the rewind has asked for frames ``lag`` times."""

    moves = None

    def __init__(self, turns: int, lag: int) -> None:
        self.all = said(turns)
        self.lag = lag

    @property
    def behind(self) -> bool:
        return self.lag > 0

    async def frames(self, **_: Any) -> list[object]:
        self.lag -= 1
        return [] if self.behind else [object()]

    async def messages(self, thread_id: str, kind: str | None = None) -> list[MessageRecord]:
        return self.all[:-2] if self.behind else self.all

    async def liminal_turns(self, thread_id: str) -> set[str]:
        return set()

    async def thread(self, thread_id: str) -> None:
        return None


class _CutHarness:
    """A file of six turns, ten bytes each: the cut's end is the offset a rewind keeps up to."""

    def __init__(self) -> None:
        self.ends: list[int] = []

    def locate(self, backing: str, cwd: str | None) -> Path:
        return Path("/nowhere") / backing

    def turns(self, path: Path) -> Any:
        from types import SimpleNamespace
        return SimpleNamespace(starts=[0, 10, 20, 30, 40, 50], earlier=False)

    def position(self, path: Path) -> int:
        return 60

    def cut(self, spans: list[tuple[Path, int, int]], current: Path, new_id: str, **_: Any) -> None:
        self.ends += [end for _, _, end in spans]


class _CuttingMover:
    port = None

    async def move_thread(self, thread: str, reason: str, plan: Any) -> None:
        write = plan(Path("/nowhere") / thread)
        write("new-session")


async def _rewound(store: _LaggingStore, harness: _CutHarness,
                   spool_behind: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """The answer to a rewind to turn 3's agent message."""
    import contextlib

    @contextlib.asynccontextmanager
    async def open_store() -> Any:
        yield store

    model = ThreadModel()
    component = Rewinder(model, _CuttingMover(), harness, open_store,  # type: ignore[arg-type]
                         spool_behind=spool_behind)
    port = FakePort(components=[model, component])
    initialize(port, {})
    async with anyio.create_task_group() as tg:
        tg.start_soon(component.run, port)
        port.from_client({"jsonrpc": "2.0", "id": 4, "method": "session/rewind",
                          "params": {"sessionId": THREAD, "toMessageId": "c:00031"}})
        with anyio.fail_after(5):
            while not [m for m in port.to_client if m.get("id") == 4]:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    [answer] = [m for m in port.to_client if m.get("id") == 4]
    return answer


@pytest.mark.anyio
async def test_a_rewind_waits_for_the_index_to_store_the_turns_before_it() -> None:
    """Six turns, the sixth not stored yet when the rewind to the third comes: counted from the
    file's end on five, the cut kept turn 4 (the model saw what the person rewound past)."""
    harness = _CutHarness()
    answer = await _rewound(_LaggingStore(6, lag=3), harness)
    assert answer["result"]["lastMessageId"] == "c:00031", answer
    assert harness.ends == [30]  # turns 1-3, up to where turn 4 starts


@pytest.mark.anyio
async def test_a_rewind_is_refused_while_the_index_stays_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("liminal.kernel.rewind.INDEX_SECONDS", 0.2)
    harness = _CutHarness()
    answer = await _rewound(_LaggingStore(6, lag=1_000_000), harness)
    assert answer["error"]["code"] == jsonrpc.INTERNAL_ERROR and "not caught up" in answer["error"]["message"]
    assert harness.ends == []


class _RestartedStore(_LaggingStore):
    """This connection's frames all stored; the last turn, the previous liminal's, stored only
    once its spool has been looked at ``lag`` times (``_LeftSpool``)."""

    async def frames(self, **_: Any) -> list[object]:
        return [object()]


class _LeftSpool:
    """The spool of the liminal that stopped: frames in it until the store has them."""

    def __init__(self, store: _RestartedStore) -> None:
        self.store = store

    def __call__(self) -> bool:
        self.store.lag -= 1
        return self.store.behind


@pytest.mark.anyio
async def test_a_rewind_after_a_restart_waits_for_the_stopped_liminals_spool() -> None:
    """Right after a restart, the sixth turn (the previous liminal's) is still in its spool: counted
    from the file's end on five, the cut kept turn 4."""
    harness = _CutHarness()
    store = _RestartedStore(6, lag=3)
    answer = await _rewound(store, harness, _LeftSpool(store))
    assert answer["result"]["lastMessageId"] == "c:00031", answer
    assert harness.ends == [30]


@pytest.mark.anyio
async def test_a_rewind_is_refused_while_a_stopped_liminals_spool_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("liminal.kernel.rewind.INDEX_SECONDS", 0.2)
    harness = _CutHarness()
    store = _RestartedStore(6, lag=1_000_000)
    answer = await _rewound(store, harness, _LeftSpool(store))
    assert answer["error"]["code"] == jsonrpc.INTERNAL_ERROR and "not caught up" in answer["error"]["message"]
    assert harness.ends == []
