"""Memory across conversations (docs/memory.md) with the real CLIs: lessons, what a swap's
dynamic zone places of another conversation, the model's review of it, and deletion.

One liminal, two threads in one project folder, the model's summaries on:

- thread A says a fact once; the side session that summarises its oldest turns is scripted to
  give it as a lesson citing that turn; A swaps it out of its context;
- thread B, later, talks about it. Its side session (one request a swap cycle, counted at the
  fake server) reviews what the coming swap would place from memory: A's lesson kept, a memo
  dropped. After B's first swap the model's request holds A's lesson and its key, not the memo;
  ``/context`` says why each is there and what the review kept out; the model recalls the key
  (its MCP ``recall`` tool) and gets A's words; ``/lessons`` lists it and the person confirms it;
- the next cycle's review is refused (the side session answers no review): A is deleted through
  ``session/delete``; B's next swap places the memo (the first stage's choice stands) and
  nothing of A, and the store keeps no part of A's lessons (``/lessons`` lists none).
"""

from __future__ import annotations

import json
import re
import time

import anyio
import pytest

from fixtures.harness import (
    SUMMARIES_ON,
    AcpClient,
    Adapter,
    ModelRequest,
    Rig,
    Scenario,
    Shell,
    Text,
    ToolCall,
)
from fixtures.harness.script import SUMMARY_REQUEST
from liminal.gradient.zone import ZONE_INTRO
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.lookup import lessons
from liminal.store.sqlite import SqliteStore
from tests.acceptance.conftest import adapter_fixture
from tests.acceptance.test_scratchpad import deleted
from tests.acceptance.test_summaries import main_requests, summary_requests, view

adapter = adapter_fixture(["claude-agent", "claude-zed", "codex-agent", "codex-zed"])

FACT = "remember: the release codename is PLOVER-8812, because the staging port moved to 6543"
LESSON = "The release codename is PLOVER-8812, because the staging port moved to 6543."
MEMO = "the staging release checklist lives in the wiki"
ABOUT = "the release codename for the staging deploy port"
NOTE = re.compile(r"^- (memo-[0-9a-f-]{36}|lesson:[0-9a-f]{10}|summary-[0-9a-f-]{36}|thread:[0-9a-f-]{36}): ",
                  re.MULTILINE)
KEY = re.compile(r"lesson:[0-9a-f]{10}")


class SideModel:
    """The model in liminal's side sessions: A's range gives the lesson (citing the turn that
    said it); B's first review keeps every note but the memo; B's next one is refused."""

    def __init__(self) -> None:
        self.reviews = 0

    def __call__(self, request: ModelRequest) -> Text:
        text = request.last_user_text
        if is_title(request):  # Claude Code titles the side session from its prompt
            return Text(json.dumps({"title": "side"}))
        if "User: ALPHA" in text:
            said = re.search(r"--- turn (\d+)\nUser: ALPHA remember", text)
            cite = f"(turn {said.group(1)}, fact) " if said else ""
            return Text(f"## STATE\nGoal: ALPHA release prep\n## SUMMARY\nALPHA-SUMMARY: the codename was set.\n"
                        f"## LESSONS\n- {cite}{LESSON}\n")
        notes = NOTE.findall(text[text.find("The notes to review:"):]) if "## REVIEW" in text else []
        if notes:
            self.reviews += 1
            if self.reviews > 1:
                return Text("I can't help with reviewing these notes.")
        verdicts = "".join(f"- {key} drop: a checklist, not the codename\n" if key.startswith("memo-")
                           else f"- {key} keep: the codename B asks about\n" for key in notes)
        return Text("## STATE\nGoal: BRAVO deploy\n## SUMMARY\nBRAVO-SUMMARY: reads.\n## LESSONS\n- none\n"
                    + (f"## REVIEW\n{verdicts}" if notes else ""))


def is_title(request: ModelRequest) -> bool:
    """Claude Code's request for a title of a new session, which quotes its first prompt."""
    return request.is_side_request and "Return JSON with a single" in json.dumps(request.body)


def recall_the_lesson(request: ModelRequest) -> ToolCall | Text:
    found = KEY.findall(json.dumps(request.body))
    return ToolCall("mcp__liminal__recall", {"key": found[-1]}) if found else Text("NO LESSON KEY")


def scenario(side: SideModel) -> Scenario:
    return (Scenario().summarise(side)
            .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")
            .add("RECALL", recall_the_lesson, "recalled"))


def configure(rig: Rig) -> None:
    base = rig.overhead()
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    # Summaries asked from half the trigger on (turns take seconds here, a side session as long).
    # B's floor (the CLI's prompt, its last turn read whole, the preamble and the zone) lands
    # 5k above the first context on Claude Code 2.1.44: the trigger leaves it the half leeway,
    # and room after B's swap for the turns its next cycle's summary needs (``asked_again``).
    (rig.home.liminal_home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {base + 12_000}\nhold_timeout_seconds = 60\nsummary_at = 0.5\n"
        "summary_turns_ahead = 50\n[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n")


def said(client: AcpClient, thread: str, text: str) -> str:
    result = client.prompt(thread, text, timeout=180)
    assert result.stop_reason == "end_turn", text
    return result.text


def swaps(rig: Rig, thread: str) -> list[SwapRecord]:
    return [r for r in SwapJournal(rig.home.liminal_home / "swaps.jsonl").records(thread) if r.outcome == "committed"]


def summaries_made(rig: Rig, thread: str) -> int:
    """The side sessions of ``thread`` whose answer liminal has taken in (its lessons stored
    and its review handed on first: ``kernel.summaries``)."""
    return sum(line.count('"summary made"') for log in rig.home.logs.glob("stderr-*-liminal.log")
               for line in log.read_text(errors="replace").splitlines() if thread in line)


def wait_made(rig: Rig, thread: str, count: int) -> None:
    deadline = time.monotonic() + 240
    while summaries_made(rig, thread) < count:
        assert time.monotonic() < deadline, rig.stderr_tail()
        time.sleep(0.2)


def asked_again(rig: Rig, client: AcpClient, thread: str) -> None:
    """Until the thread's next swap cycle has asked its side session: a few turns of notes,
    while every turn since the swap is one the swap would keep (nothing to summarise yet). How
    many that takes is the CLI's: Claude Code 2.1.44's file held two reads after the swap."""
    since = swaps(rig, thread)[-1].started_at
    for n in range(8):
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            if [r for r in summary_requests(rig) if r.t > since and b"BRAVO" in r.raw]:
                return
            time.sleep(0.2)
        said(client, thread, f"BRAVO notes {n}: " + "a line of notes kept for later; " * 30)
    raise AssertionError(f"no side session of {thread}'s next cycle: {rig.stderr_tail()}")


def until_swapped(rig: Rig, client: AcpClient, thread: str, count: int, prompt: str) -> None:
    for n in range(12):
        if len(swaps(rig, thread)) >= count:
            return
        said(client, thread, f"{prompt} BIG read {n}")
    raise AssertionError(f"no swap {count} of {thread}: {rig.stderr_tail()}")


def zone_of(request: ModelRequest) -> str:
    text = json.dumps(request.body)
    assert text.count(ZONE_INTRO) == 1, text[-2000:]
    return text[text.index(ZONE_INTRO):][:3000]


def liminal_client(rig: Rig) -> AcpClient:
    client = AcpClient(rig.home.liminal_argv(), {**rig.home.env(), **SUMMARIES_ON}, rig.home.project,
                       rig.home.logs / f"stderr-{len(rig.clients)}-liminal.log")
    rig.clients.append(client)
    return client


@pytest.mark.timeout(900)
def test_a_lesson_of_one_thread_reaches_another_reviewed_and_goes_with_its_thread(adapter: Adapter, rig: Rig) -> None:
    side = SideModel()
    rig.server.script = scenario(side)
    configure(rig)
    with liminal_client(rig) as client:
        client.initialize()
        a = client.new_session(rig.home.project)["sessionId"]
        said(client, a, f"ALPHA {FACT}")
        said(client, a, "ALPHA BIG read first")
        wait_made(rig, a, 1)  # the lesson is stored before A goes on
        until_swapped(rig, client, a, 1, "ALPHA")

        b = client.new_session(rig.home.project)["sessionId"]
        assert said(client, b, f"/memo {MEMO} #ops").startswith("Memo kept")
        said(client, b, f"BRAVO what was {ABOUT}?")
        said(client, b, f"BRAVO {ABOUT}: BIG read first")
        wait_made(rig, b, 1)  # reviewed before the swap it is for
        until_swapped(rig, client, b, 1, f"BRAVO {ABOUT}:")
        seen = len(main_requests(rig))
        said(client, b, f"BRAVO after the swap, {ABOUT}")
        after_first = view(main_requests(rig)[seen])
        context = said(client, b, "/context")
        said(client, b, f"BRAVO RECALL the lesson on {ABOUT}")
        answer = next(v for v in reversed([view(r) for r in main_requests(rig)]) if v.tool_results)
        listed = said(client, b, "/lessons")
        key = KEY.findall(listed)[0]
        confirmed = said(client, b, f"/lessons confirm {key}")
        asked_again(rig, client, b)  # the next cycle's side session (its review refused), before the swap
        wait_made(rig, b, 2)
        deleted(client, a)
        until_swapped(rig, client, b, 2, f"BRAVO {ABOUT}:")
        seen = len(main_requests(rig))
        said(client, b, f"BRAVO after the second swap, {ABOUT}")
        after_second = view(main_requests(rig)[seen])
        listed_after = said(client, b, "/lessons")

    # A's lesson, from the turn that said it; B's own range gave none; the person confirms it.
    assert listed.startswith("1 lesson of this project's conversations, newest first") and LESSON in listed, listed
    assert confirmed.startswith(f"Lesson {key} confirmed"), confirmed
    first, second = swaps(rig, b)[:2]
    placed = {e["key"]: e for e in first.zone or []}
    assert next(k for k, e in placed.items() if e["kind"] == "lesson") == key
    assert placed[key].get("from") == [a] and LESSON in placed[key]["text"]
    assert placed[key]["why"] == "the model's review kept it: the codename B asks about"
    memo = next(k for k in placed if k.startswith("memo-"))
    assert placed[memo]["placed"] is False and placed[memo]["why"].endswith("a checklist, not the codename")
    # After B's first swap the model's request holds the lesson and its key, not the memo.
    zone = zone_of(after_first)
    assert key in zone and LESSON in zone and "from the conversation" in zone and MEMO not in zone, zone
    assert f"lesson {key}" in context and "the model's review kept it" in context, context
    assert "Kept out by the model's review (1):" in context and memo in context, context
    # Pulled by the model through liminal's recall tool: A's words.
    tool_text = answer.tool_results[-1].text
    assert not answer.tool_results[-1].is_error and LESSON in tool_text and FACT in tool_text, tool_text

    # One request a swap cycle held the review (the summary's own), the second refused.
    asked = [r for r in summary_requests(rig) if b"BRAVO" in r.raw and b"The notes to review:" in r.raw
             and not is_title(view(r))]
    assert [r for r in asked if r.t < first.started_at] and len([r for r in asked if r.t < first.started_at]) == 1
    timeline = ([("review", r.t) for r in asked] + [("swap", first.started_at), ("swap", second.started_at)])
    assert len([r for r in asked if first.started_at < r.t < second.started_at]) == 1, sorted(timeline, key=lambda x: x[1])
    assert all(SUMMARY_REQUEST.encode() in r.raw and b"## STATE" in r.raw for r in asked)
    assert side.reviews >= 2  # (a third cycle's may have come by the end)
    # Refused: the first stage's choice stands (the memo is back); A deleted: nothing of it.
    later = {e["key"]: e for e in second.zone or []}
    assert memo in later and later[memo].get("placed", True) and "why" not in later[memo], later
    assert not [e for e in later.values() if a in e.get("from", []) or e["kind"] in ("lesson", "tickle")], later
    zone = zone_of(after_second)
    # (B's own recall of the lesson is in its history; the zone does not place it again.)
    assert MEMO in zone and key not in zone and "from the conversation" not in zone and a not in zone, zone
    assert "PLOVER-8812" not in zone, zone

    async def left() -> list[lessons.Lesson]:
        store = await SqliteStore.open(rig.home.liminal_home / "liminal.db")
        try:
            return await lessons.every(store)
        finally:
            await store.aclose()

    assert [lesson for lesson in anyio.run(left) if a in lesson.threads] == []
    assert listed_after.startswith("No lessons in this project's conversations yet"), listed_after
