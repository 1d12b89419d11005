"""The side summaries (``liminal.kernel.summaries``) through a fake port: a turn end past
``summary_at`` of the trigger has the turns a swap would consolidate summarised in a side
session of liminal's own, which the client never sees and whose files are removed; the summary
is stored and the swap's summarizer holds it; a range is summarised once, by this liminal or
the next."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.acp.port import OwnRequestError
from liminal.config import GradientSettings, Settings, SwapSettings
from liminal.gradient.summarize import (
    ANCHOR_REQUEST,
    FOLD_REQUEST,
    ModelSummary,
    TurnDigest,
    WithSummaries,
    text_hash,
    turn_key,
)
from liminal.kernel.policy import CostPolicy
from liminal.kernel.summaries import AnchorNotWritten, SideSummaries, side_root
from liminal.kernel.threads import ThreadModel, ThreadState
from liminal.store.configured import open_store
from liminal.store.records import SUMMARY_THREAD
from tests.support.fakeport import UNANSWERED, FakePort

pytestmark = pytest.mark.anyio
THREAD = "11111111-1111-4111-8111-111111111111"
SIDE = "33333333-3333-4333-8333-333333333333"
TURNS = [TurnDigest(n, f"request {n}: move the port", (f"reply {n}",), ()) for n in range(1, 5)]
LATER = [TurnDigest(n, f"request {n}: now the proxy", (f"reply {n}",), ()) for n in range(5, 7)]
ANSWER = "## STATE\nGoal: the port moves to 8080\n## SUMMARY\nMODEL SUMMARY: 8080 it is."


class Harness:
    name = "fake"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.forgotten: list[tuple[str, str]] = []
        self.prepared: list[Path] = []

    def locate(self, backing_id: str, cwd: str | None) -> Path | None:
        return self.path

    def ancient(self, path: Path, target_tokens: int, recent_tokens: int | None = None) -> list[TurnDigest]:
        return TURNS

    def side_params(self) -> dict[str, Any]:
        return {"_meta": {"x": 1}}

    def prepare_side(self, folder: Path) -> None:
        (folder / "settings").write_text("no tools")
        self.prepared.append(folder)

    def side_prompt(self, text: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text}]

    def digests(self, path: Path) -> list[TurnDigest]:
        return TURNS + LATER

    def forget(self, session_id: str, cwd: str, *, closed: bool = False) -> None:
        self.forgotten.append((session_id, cwd))


def agent(port: list[FakePort], asked: list[tuple[str, dict[str, Any]]]) -> Any:
    def answer(method: str, params: dict[str, Any]) -> Any:
        asked.append((method, params))
        if method == "session/new":
            return {"sessionId": SIDE}
        if method == "session/prompt":
            # The model tries a tool (refused by the router), then answers in chunks.
            port[0].from_agent({"jsonrpc": "2.0", "id": 99, "method": "session/request_permission", "params": {
                "sessionId": SIDE, "toolCall": {"toolCallId": "t"}, "options": [
                    {"optionId": "ok", "kind": "allow_once", "name": "Allow"},
                    {"optionId": "no", "kind": "reject_once", "name": "Reject"}]}})
            for part in (ANSWER[:20], ANSWER[20:]):
                port[0].from_agent({"jsonrpc": "2.0", "method": "session/update", "params": {
                    "sessionId": SIDE, "update": {"sessionUpdate": "agent_message_chunk",
                                                  "content": {"type": "text", "text": part}}}})
            return {"stopReason": "end_turn"}
        if method == "session/close":
            return {}
        raise OwnRequestError(method, {"code": -32601, "message": "no"})
    return answer


async def made(tmp_path: Path, asked: list[tuple[str, dict[str, Any]]],
               context: int) -> tuple[SideSummaries, FakePort, Harness]:
    settings = Settings(home=tmp_path)
    swap = SwapSettings(high_tokens=10_000, target_tokens=5_000, summaries=True)
    model = ThreadModel()
    model.capabilities = {"sessionCapabilities": {"close": {}}}
    model.threads[THREAD] = ThreadState(THREAD, cwd=str(tmp_path / "project"), context_tokens=context)
    harness = Harness(tmp_path / "session.jsonl")
    summaries = SideSummaries(swap, harness, model, CostPolicy(swap, GradientSettings(), 167_000),  # type: ignore[arg-type]
                              tmp_path, lambda: open_store(settings))
    holder: list[FakePort] = []
    port = FakePort(answer=agent(holder, asked))
    holder.append(port)
    await summaries.prepare(port)
    return summaries, port, harness


async def one_summary(summaries: SideSummaries, port: FakePort) -> None:
    """A turn end past ``summary_at``, its side session run to its end, the component closed."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(summaries.run, port)
        summaries._turn_ended(THREAD, True)
        with anyio.fail_after(10):
            await summaries.wait_for(1)
        tasks.cancel_scope.cancel()
    await summaries.aclose()


async def test_a_swap_coming_has_the_oldest_turns_summarised_in_a_side_session(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, port, harness = await made(tmp_path, asked, context=8_000)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(summaries.run, port)
        assert summaries.summarizer(THREAD) is None  # nothing yet: the swap's preamble is extractive
        summaries._turn_ended(THREAD, True)
        with anyio.fail_after(10):
            await summaries.wait_for(1)
        summaries._turn_ended(THREAD, True)  # one side session per swap cycle
        assert summaries._receive.statistics().current_buffer_used == 0
        port.bind(THREAD, "22222222-2222-4222-8222-222222222222")  # swapped: a new cycle
        summaries._turn_ended(THREAD, True)  # the same range again: not asked twice
        with anyio.fail_after(10):
            await summaries.wait_for(2)
        tasks.cancel_scope.cancel()
    await summaries.aclose()
    methods = [m for m, _ in asked]
    assert methods == ["session/new", "session/prompt", "session/close"]
    opened = asked[0][1]
    assert opened["mcpServers"] == [] and Path(opened["cwd"]).parent == side_root(tmp_path)
    assert opened["_meta"] == {"x": 1}  # what the harness adds for its adapter
    assert harness.prepared == [Path(opened["cwd"])]  # and writes in its folder (removed after)
    assert "request 1: move the port" in asked[1][1]["prompt"][0]["text"]
    assert "Do not use any tools" in asked[1][1]["prompt"][0]["text"]
    assert port.to_client == []  # not a frame of it reached the client
    refusal = next(m for m in port.to_agent if m.get("id") == 99)
    assert refusal["result"] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    # Removed after the close, and once more when the agent has gone (``aclose``).
    assert set(harness.forgotten) == {(SIDE, opened["cwd"])} and not await anyio.Path(opened["cwd"]).exists()
    summarizer = summaries.summarizer(THREAD)
    assert summarizer is not None and summarizer.anchor == "Goal: the port moves to 8080"
    assert "MODEL SUMMARY: 8080 it is." in summarizer.summarize(TURNS, None, 4000)
    assert summaries.anchor(THREAD) == "Goal: the port moves to 8080"
    async with open_store(Settings(home=tmp_path)) as store:
        stored = await store.messages(SUMMARY_THREAD, "summary")
    assert [m.text for m in stored] == ["MODEL SUMMARY: 8080 it is."]
    assert stored[0].data["thread"] == THREAD and len(stored[0].data["keys"]) == 4
    assert stored[0].data["content_hash"]

    # The next liminal reads it from the store and does not ask again.
    again: list[tuple[str, dict[str, Any]]] = []
    later, port2, _ = await made(tmp_path, again, context=8_000)
    await one_summary(later, port2)
    assert again == [] and later.anchor(THREAD) == "Goal: the port moves to 8080"


class SideProcess(FakePort):
    """A process of the agent command started for one side session (``Port.start_agent``)."""

    failure: str | None = None
    dropped = 0
    pid: int | None = None


class NoClosePort(FakePort):
    """The port of an agent without ``session/close`` (the older Claude adapter), whose
    processes the test starts and whose discards it records."""

    def __init__(self, answer: Any, asked: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__(answer=answer)
        self.asked = asked
        self.started: list[SideProcess] = []
        self.discarded: list[Any] = []

    async def start_agent(self) -> SideProcess:
        holder: list[FakePort] = []
        inner = agent(holder, self.asked)

        def answer(method: str, params: dict[str, Any]) -> Any:
            if method in ("initialize", "authenticate"):
                self.asked.append((method, params))
                return {"protocolVersion": 1, "agentCapabilities": {}} if method == "initialize" else {}
            return inner(method, params)

        process = SideProcess(answer=answer)
        holder.append(process)
        self.started.append(process)
        return process

    def discard_agent(self, process: Any) -> None:
        self.discarded.append(process)


async def test_an_agent_that_cannot_close_a_session_has_each_side_session_in_a_process_it_stops(
        tmp_path: Path) -> None:
    """Without ``session/close`` a side session would live (a CLI process of the older Claude
    adapter) until the agent exits: it runs in a process of the agent command of its own, told
    the client's ``initialize`` and ``authenticate``, which is stopped once the answer is in.
    Nothing of it reaches the agent in use nor the client."""
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, harness = await made(tmp_path, asked, context=8_000)
    on_the_agent: list[tuple[str, dict[str, Any]]] = []
    port = NoClosePort(agent([], on_the_agent), asked)
    await summaries.prepare(port)
    summaries.model.capabilities = {"sessionCapabilities": {"resume": {}}}
    summaries.model.initialize = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}
    summaries.model.authenticate = {"methodId": "key"}
    await one_summary(summaries, port)
    assert [m for m, _ in asked] == ["initialize", "authenticate", "session/new", "session/prompt"]
    assert asked[0][1] == summaries.model.initialize and asked[1][1] == {"methodId": "key"}
    assert on_the_agent == [] and port.to_agent == [] and port.to_client == []
    assert len(port.started) == 1 and port.discarded == port.started  # stopped, its CLI with it
    process = port.started[0]
    assert process.to_client == []  # its words were liminal's (rule 11), its tool refused
    refusal = next(m for m in process.to_agent if m.get("id") == 99)
    assert refusal["result"] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    assert (SIDE, asked[2][1]["cwd"]) in harness.forgotten and not await anyio.Path(asked[2][1]["cwd"]).exists()
    summarizer = summaries.summarizer(THREAD)
    assert summarizer is not None and summarizer.anchor == "Goal: the port moves to 8080"


async def test_a_side_process_that_fails_to_start_costs_the_summary_only(tmp_path: Path) -> None:
    """A process that cannot be made ready (its ``initialize`` refused) is stopped all the same,
    and the swap keeps the extractive preamble."""
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, _ = await made(tmp_path, asked, context=8_000)
    port = NoClosePort(agent([], []), [])
    await summaries.prepare(port)
    summaries.model.capabilities = {"sessionCapabilities": {}}
    summaries.model.initialize = {"protocolVersion": 1}

    async def refused() -> SideProcess:
        process = SideProcess(answer=lambda method, params: (_ for _ in ()).throw(
            OwnRequestError(method, {"code": -32603, "message": "no"})))
        port.started.append(process)
        return process

    port.start_agent = refused  # type: ignore[method-assign]
    await one_summary(summaries, port)
    assert len(port.started) == 1 and port.discarded == port.started
    assert summaries.summarizer(THREAD) is None and port.to_agent == []


async def test_with_no_process_to_be_had_the_side_session_runs_in_the_agent(tmp_path: Path) -> None:
    """liminal in a conductor's chain cannot start a process of the agent (``start_agent``
    refuses): an agent that cannot close sessions has the side session in itself, left open
    there like the sessions swaps leave, and the summary is made."""
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, _ = await made(tmp_path, asked, context=8_000)
    holder: list[FakePort] = []
    port = NoClosePort(agent(holder, asked), [])
    holder.append(port)
    await summaries.prepare(port)
    summaries.model.capabilities = {"sessionCapabilities": {"resume": {}}}
    summaries.model.initialize = {"protocolVersion": 1}

    async def none_to_be_had() -> SideProcess:
        raise OwnRequestError("", "liminal is a proxy component: the conductor runs the agent")

    port.start_agent = none_to_be_had  # type: ignore[method-assign]
    await one_summary(summaries, port)
    assert [m for m, _ in asked] == ["session/new", "session/prompt"]  # no session/close
    assert port.started == [] and port.discarded == [] and port.to_client == []
    assert next(m for m in port.to_agent if m.get("id") == 99)["result"]["outcome"]["optionId"] == "no"
    summarizer = summaries.summarizer(THREAD)
    assert summarizer is not None and summarizer.anchor == "Goal: the port moves to 8080"


async def test_a_side_session_given_up_mid_turn_is_cancelled_before_it_is_closed(tmp_path: Path) -> None:
    """liminal stops while the model writes a summary: the side session's turn is cancelled,
    then the session closed and its files removed, so the CLI writes no more to them; the cancel
    is liminal's alone (no tap sees it)."""
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, harness = await made(tmp_path, asked, context=8_000)
    inner = agent([], asked)

    prompted = anyio.Event()

    def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "session/prompt":
            asked.append((method, params))
            prompted.set()
            return UNANSWERED
        return inner(method, params)

    tapped: list[Any] = []
    port = FakePort(answer=answer)
    take = port.router.take

    def taking() -> Any:
        out = take()
        tapped.extend(out.events)
        return out

    port.router.take = taking  # type: ignore[method-assign]
    await summaries.prepare(port)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(summaries.run, port)
        summaries._turn_ended(THREAD, True)
        with anyio.fail_after(10):
            await prompted.wait()
            await summaries.stopping()
        tasks.cancel_scope.cancel()
    await summaries.aclose()
    sent = [m.get("method") for m in port.to_agent if m.get("method")]
    assert sent[-2:] == ["session/cancel", "session/close"], sent
    cancel = next(m for m in port.to_agent if m.get("method") == "session/cancel")
    assert cancel["params"] == {"sessionId": SIDE}
    assert (SIDE, asked[0][1]["cwd"]) in harness.forgotten
    assert summaries.summarizer(THREAD) is None and port.to_client == []
    assert [e for e in tapped if e.method == "session/cancel"] == []


async def test_no_summary_far_from_the_trigger_or_when_turned_off(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, _ = await made(tmp_path, asked, context=3_000)  # under 0.6 of 10k
    summaries._turn_ended(THREAD, True)
    assert summaries._receive.statistics().current_buffer_used == 0
    summaries.settings = SwapSettings(high_tokens=10_000, target_tokens=5_000, summaries=False)
    summaries.model.threads[THREAD].context_tokens = 9_000
    summaries._turn_ended(THREAD, True)
    assert summaries._receive.statistics().current_buffer_used == 0



# ------------------------------------------------------------------ folding (issue 24)

OLD_TURNS = [TurnDigest(n, f"old request {n}", (f"old reply {n}",), ()) for n in range(3)]
OLDER = [ModelSummary((turn_key(t),), f"OLDER SUMMARY {t.number}: " + "x" * 380, "Goal: older") for t in OLD_TURNS]
# The preamble of the swap that consolidated their turns: the next one carries them from it.
CARRIED = WithSummaries(tuple(OLDER), "Goal: older").summarize(OLD_TURNS, None, 2000)
FOLD = "## SUMMARY\nFOLDED: the three older summaries, in short."


def answering(port: list[FakePort], asked: list[tuple[str, dict[str, Any]]], text: Callable[[str], str],
              hang: bool = False) -> Any:
    """An agent whose side session answers ``text(prompt)`` in one chunk (``hang``: never)."""
    def answer(method: str, params: dict[str, Any]) -> Any:
        asked.append((method, params))
        if method == "session/new":
            return {"sessionId": SIDE}
        if method == "session/prompt":
            said = text(params["prompt"][0]["text"])
            if said:
                port[0].from_agent({"jsonrpc": "2.0", "method": "session/update", "params": {
                    "sessionId": SIDE, "update": {"sessionUpdate": "agent_message_chunk",
                                                  "content": {"type": "text", "text": said}}}})
            return {"stopReason": "end_turn"}
        if method == "session/close":
            return {}
        raise OwnRequestError(method, {"code": -32601, "message": "no"})
    return answer


async def folding(tmp_path: Path, asked: list[tuple[str, dict[str, Any]]], text: Callable[[str], str],
                  *, summary_tokens: int = 500) -> tuple[SideSummaries, FakePort]:
    summaries, _, _ = await made(tmp_path, asked, context=7_000)
    summaries.policy = CostPolicy(summaries.settings, GradientSettings(summary_tokens=summary_tokens), 167_000)
    holder: list[FakePort] = []
    port = FakePort(answer=answering(holder, asked, text))
    holder.append(port)
    await summaries.prepare(port)
    summaries._summaries[THREAD] = list(OLDER)  # made earlier (an earlier liminal's, say)
    summaries._loaded.add(THREAD)
    return summaries, port


def fold_or_summary(prompt: str) -> str:
    return FOLD if FOLD_REQUEST in prompt else ANSWER


async def test_past_their_room_the_oldest_summaries_are_folded_in_a_side_session(tmp_path: Path) -> None:
    """The preamble's 1,274 characters for the model's summaries (a 500-token preamble) hold
    three older ones of 400 and the new one: past 0.8 of the room, the three older are folded
    into one by the model, stored once with the range and its parts, and the next preamble
    holds the fold in their place: nothing gives way."""
    asked: list[tuple[str, dict[str, Any]]] = []
    box: list[SideSummaries] = []
    during: list[list[str]] = []

    def model(prompt: str) -> str:
        if FOLD_REQUEST in prompt:  # what a swap would be given while the fold is written
            during.append([s.text for s in box[0].summaries(THREAD)])
        return fold_or_summary(prompt)

    summaries, port = await folding(tmp_path, asked, model)
    box.append(summaries)
    await one_summary(summaries, port)
    prompts = [p["prompt"][0]["text"] for m, p in asked if m == "session/prompt"]
    assert len(prompts) == 2 and FOLD_REQUEST in prompts[1]  # the range, then the fold
    assert all(f"OLDER SUMMARY {n}" in prompts[1] for n in range(3)) and "MODEL SUMMARY" not in prompts[1]
    assert summaries.folds == 1 and port.to_client == []
    # The summary that called for the fold was given to the swaps with it, not before: a swap
    # in between would have had to leave the oldest out.
    assert during == [[s.text for s in OLDER]]
    assert [s.text for s in summaries.summaries(THREAD)][-2:] == [
        "MODEL SUMMARY: 8080 it is.", "FOLDED: the three older summaries, in short."]
    preamble = summaries.summarizer(THREAD)
    assert preamble is not None
    assert "OLDER SUMMARY 2" in CARRIED
    text = preamble.summarize(TURNS, CARRIED, 2000)
    assert "FOLDED: the three older" in text and "MODEL SUMMARY: 8080" in text
    assert "OLDER SUMMARY" not in text and "left out" not in text
    assert preamble.anchor == "Goal: the port moves to 8080"  # a fold writes no anchor
    async with open_store(Settings(home=tmp_path)) as store:
        stored = await store.messages(SUMMARY_THREAD, "summary")
    [fold] = [m for m in stored if m.data.get("parts")]
    assert fold.text == "FOLDED: the three older summaries, in short."
    assert fold.data["parts"] == [text_hash(s.text) for s in OLDER]
    assert fold.data["keys"] == [turn_key(t) for t in OLD_TURNS] and fold.data["content_hash"]

    # The next liminal reads the fold back and holds it in the same place.
    later, _, _ = await made(tmp_path, [], context=7_000)
    await later._load(THREAD)
    await later.aclose()
    assert [s.parts for s in later.summaries(THREAD)] == [(), tuple(fold.data["parts"])]


async def test_a_fold_no_shorter_than_its_parts_is_not_used_nor_asked_again(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, port = await folding(tmp_path, asked, lambda p: "## SUMMARY\n" + "y" * 2000
                                    if FOLD_REQUEST in p else ANSWER)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(summaries.run, port)
        summaries._turn_ended(THREAD, True)
        with anyio.fail_after(10):
            await summaries.wait_for(1)
        summaries._asked_on.clear()  # the next swap cycle: one summary per cycle (price24)
        summaries._turn_ended(THREAD, True)
        with anyio.fail_after(10):
            await summaries.wait_for(2)
        tasks.cancel_scope.cancel()
    await summaries.aclose()
    prompts = [p["prompt"][0]["text"] for m, p in asked if m == "session/prompt"]
    assert [FOLD_REQUEST in p for p in prompts] == [False, True]  # once: not at the next turn end
    assert summaries.folds == 0
    preamble = summaries.summarizer(THREAD)
    assert preamble is not None and "y" * 100 not in preamble.summarize(TURNS, CARRIED, 2000)


# ------------------------------------------------------------------ /context rebuild (issue 24)

STATE = "## STATE\nGoal: REBUILT the proxy on 9090\nEditing: proxy.py"


async def rebuilt(tmp_path: Path, text: Callable[[str], str], *, turns: bool = True,
                  new_fails: bool = False) -> tuple[str | AnchorNotWritten, SideSummaries, list[Any]]:
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, harness = await made(tmp_path, asked, context=1_000)  # far from any trigger
    holder: list[FakePort] = []
    answer = answering(holder, asked, text)
    port = FakePort(answer=(lambda m, p: (_ for _ in ()).throw(OwnRequestError(m, {"code": -32603, "message": "no room"}))
                            if m == "session/new" else answer(m, p)) if new_fails else answer)
    holder.append(port)
    await summaries.prepare(port)
    if not turns:
        harness.path = None  # type: ignore[assignment]
    try:
        with anyio.fail_after(10):
            result: str | AnchorNotWritten = await summaries.rebuild(THREAD)
    except AnchorNotWritten as exc:
        result = exc
    await summaries.aclose()
    return result, summaries, asked


async def test_rebuild_writes_the_state_anchor_now_from_the_whole_context(tmp_path: Path) -> None:
    result, summaries, asked = await rebuilt(tmp_path, lambda p: STATE)
    assert result == "Goal: REBUILT the proxy on 9090\nEditing: proxy.py"
    [prompt] = [p["prompt"][0]["text"] for m, p in asked if m == "session/prompt"]
    assert ANCHOR_REQUEST in prompt and "request 1: move the port" in prompt
    assert "request 6: now the proxy" in prompt  # the recent turns too: the whole context now
    assert summaries.anchor(THREAD) == result  # /context shows it
    preamble = summaries.summarizer(THREAD)
    assert preamble is not None and preamble.summarize(TURNS, None, 4000).startswith(
        "### STATE\nGoal: REBUILT the proxy on 9090")  # the next swap's preamble starts with it
    assert [m for m, _ in asked] == ["session/new", "session/prompt", "session/close"]
    async with open_store(Settings(home=tmp_path)) as store:
        [kept] = await store.messages(SUMMARY_THREAD, "summary")
    assert kept.data["anchor"] == result and kept.data["keys"] == [] and kept.text == ""
    later, _, _ = await made(tmp_path, [], context=1_000)
    await later._load(THREAD)
    await later.aclose()
    assert later.anchor(THREAD) == result  # and the next liminal's


async def test_rebuild_says_why_not_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import liminal.kernel.summaries as module
    from liminal.kernel import sidesession

    cases = {"no text": await rebuilt(tmp_path / "a", lambda p: ""),
             "no turns": await rebuilt(tmp_path / "b", lambda p: STATE, turns=False),
             "failed": await rebuilt(tmp_path / "c", lambda p: STATE, new_fails=True)}
    said = {name: str(result) for name, (result, _, _) in cases.items()}
    assert all(isinstance(result, AnchorNotWritten) and summaries.anchor(THREAD) is None
               for result, summaries, _ in cases.values()), said
    assert said == {"no text": "the side session answered no text",
                    "no turns": "the model's context holds no turn yet",
                    "failed": "the agent answered the side session's session/new with an error: no room"}, said

    # The agent never answers: bounded, said, and the side session closed all the same.
    monkeypatch.setattr(module, "REBUILD_SECONDS", 0.5)
    monkeypatch.setattr(sidesession, "CLOSE_SECONDS", 0.5)
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, port, harness = await made(tmp_path / "d", asked, context=1_000)
    port.answer = None  # the side session opens; its prompt is never answered

    async def open_it() -> None:
        while not port.to_agent:  # noqa: ASYNC110 - the fake port has no event for it
            await anyio.sleep(0.01)
        port.from_agent({"jsonrpc": "2.0", "id": port.to_agent[0]["id"], "result": {"sessionId": SIDE}})

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(open_it)
            with pytest.raises(AnchorNotWritten, match=r"gave no answer within (0|1) s"):
                await summaries.rebuild(THREAD)
    await summaries.aclose()
    assert harness.forgotten and summaries.anchor(THREAD) is None

    # Behind a summary that takes longer than the bound: said so, and nothing asked.
    summaries, port, _ = await made(tmp_path / "f", asked := [], context=1_000)
    held, done = anyio.Event(), anyio.Event()

    async def summarising() -> None:
        async with summaries._one_at_a_time:
            held.set()
            await done.wait()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(summarising)
        await held.wait()
        with pytest.raises(AnchorNotWritten, match="a summary of older turns was still being written"):
            await summaries.rebuild(THREAD)
        done.set()
    await summaries.aclose()
    assert asked == []

    # Mid-turn: not asked at all.
    summaries, port, _ = await made(tmp_path / "e", asked := [], context=1_000)
    port.prompt_in_flight = lambda thread: True  # type: ignore[method-assign]
    with pytest.raises(AnchorNotWritten, match="a prompt is running"):
        await summaries.rebuild(THREAD)
    await summaries.aclose()
    assert asked == []


def test_a_codex_side_folder_turns_codex_s_tools_off(tmp_path: Path) -> None:
    """The project config codex-agent's Codex reads for the side session's cwd: on main none was
    written and Codex 0.166 offered ten tools there (tests/acceptance/test_summaries.py)."""
    import tomllib

    from liminal.harness.codex.live import CodexSessions

    folder = tmp_path / "side" / "x"
    folder.mkdir(parents=True)
    CodexSessions(GradientSettings(), env={"CODEX_HOME": str(tmp_path / "codex")}).prepare_side(folder)
    config = tomllib.loads((folder / ".codex" / "config.toml").read_text())
    assert config["features"]["shell_tool"] is False and config["features"]["unified_exec"] is False
    assert config["web_search"] == "disabled" and config["sandbox_mode"] == "read-only"
    assert config["tools"]["update_plan"]["enabled"] is False
    assert (folder / ".codex" / "config.toml").stat().st_mode & 0o077 == 0


async def test_a_summary_waits_until_the_swap_is_a_turn_or_two_away(tmp_path: Path) -> None:
    """Each side session costs the CLI's own prompt again (issue 24: a side session at every
    turn end past ``summary_at`` cost 0.86 of auto-compact in bench/cost.py, once per swap cycle
    0.82): past ``summary_at`` but further from the trigger than two turns at the thread's pace,
    none is asked for."""
    asked: list[tuple[str, dict[str, Any]]] = []
    summaries, _, _ = await made(tmp_path, asked, context=6_500)  # past 0.6 of 10k
    summaries.model.threads[THREAD].pace.observe(1_000, 1)  # turns of 1k: the swap is 3.5 away
    summaries._turn_ended(THREAD, True)
    assert summaries._receive.statistics().current_buffer_used == 0
    summaries.model.threads[THREAD].context_tokens = 8_000  # two turns away
    summaries._turn_ended(THREAD, True)
    assert summaries._receive.statistics().current_buffer_used == 1
