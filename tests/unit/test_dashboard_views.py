"""What the dashboard computes from a thread's messages (``liminal.dashboard.views``), and its
HTTP rules (``liminal.dashboard.app``) without a browser: the chart's points and where moves
fall on them, what the model still sees of each turn, the savings estimate, the token and
Origin rules, and a store that is never written."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.datastructures import Headers
from websockets.http11 import Request

from liminal.config import load
from liminal.dashboard import views
from liminal.dashboard.app import Dashboard
from liminal.store.base import StoreError
from liminal.store.records import Batch, ThreadUpdate, conversation, turn_numbers
from liminal.store.sqlite import SqliteStore
from tests.support import dashboard_store as fixture

pytestmark = pytest.mark.anyio
# Claude Code's auto-compaction point, and the prompt cache's life (the settings' default).
TERMS = views.Terms(ceiling=167_000, cache_life=300.0)


def flux_view(head: int | None = None, summary_before: bool = False) -> dict:
    writer, _, update, _ = fixture.flux_thread()
    from liminal.store.records import merge_thread

    return views.thread_view(merge_thread(None, update), writer.messages, (), head=head,
                             summary_before=summary_before, cut={}, terms=TERMS)


def test_the_chart_has_a_point_per_model_call_and_the_moves_between_them() -> None:
    view = flux_view()
    assert len(view["points"]) == 36  # three calls a turn, twelve turns
    swaps = [m for m in view["moves"] if m["move"] == "swap"]
    assert [m["at"] for m in swaps] == [15, 30]  # after turn 5's and turn 10's last call
    assert [m["turn"] for m in swaps] == [5, 10]
    assert view["points"][14]["used"] == swaps[0]["tokens_before"]
    assert view["points"][15]["used"] < swaps[0]["tokens_before"]
    assert view["marks"] == [{"name": "relay-ok", "at": 9, "time": view["marks"][0]["time"], "turn": 3}]
    assert swaps[0]["payback_calls"] == 3.2 and swaps[0]["rebuild"] == 41_000.0


def test_the_list_counts_liminals_swaps_apart_from_the_persons_moves() -> None:
    w = fixture.Writer("t", "c", 0.0)
    for n, move in enumerate(("swap", "/clear", "/optimise", "/undo"), 1):
        w.turn_of(f"p{n}", "ok", 1000 * n)
        w.move(move, 1000 * n, 500, f"new-{n}", old="t")
    from liminal.store.records import ThreadSummary, merge_thread

    thread = merge_thread(None, ThreadUpdate("t", 0.0, title="t", backing_ids=("t", "a", "b", "c", "d")))
    row = views.thread_row(ThreadSummary(thread, 4, 500, 10_000, 10.0),
                           [m for m in w.messages if m.kind in ("usage", "swap")], TERMS)
    assert (row["swaps"], row["moves"]) == (2, 4)
    # The thread's page says the same, from the same helper (``moves.is_rewrite``).
    view = views.thread_view(thread, w.messages, (), head=None, summary_before=False, cut={}, terms=TERMS)
    assert (view["swaps"], view["move_count"]) == (2, 4)


def test_context_now_is_what_a_move_since_the_last_model_call_left() -> None:
    # /undo from 150k to 60k with no model call since: the page says 60k, as the list and
    # ``liminal threads`` do (``records.context_now``), not the last usage point's 150k.
    w = fixture.Writer("t", "c", 0.0)
    w.turn_of("p1", "ok", 100_000)
    w.turn_of("p2", "ok", 150_000)
    w.move("/undo", 150_000, 60_000, "new-1", old="t")
    from liminal.store.records import merge_thread

    thread = merge_thread(None, ThreadUpdate("t", 0.0, title="t", backing_ids=("t", "new-1")))
    view = views.thread_view(thread, w.messages, (), head=None, summary_before=False, cut={}, terms=TERMS)
    assert view["points"][-1]["used"] == 150_000
    # The chart draws what the move left after the last call ("moved"): its line ends at 60k.
    assert view["context_now"] == {"used": 60_000, "size": 200_000, "moved": True}
    w.turn_of("p3", "ok", 61_000)  # the next model call's point is the context again
    view = views.thread_view(thread, w.messages, (), head=None, summary_before=False, cut={}, terms=TERMS)
    assert view["context_now"] == {"used": 61_000, "size": 200_000, "moved": False}


def test_a_usage_point_repeated_within_a_call_is_one_point() -> None:
    w = fixture.Writer("t", "c", 0.0)
    w.prompt("hello")
    for used in (1000, 1000, 1500, 1500, 1500):
        w.add("usage", data={"used": used, "size": 10_000})
    numbers = turn_numbers(w.messages, ())
    assert [p.used for p in views.points(w.messages, numbers)] == [1000, 1500]


def test_what_the_model_still_sees_of_each_turn() -> None:
    w = fixture.Writer("t", "c", 0.0)
    for n in range(1, 7):
        w.turn_of(f"prompt {n}", "ok", 1000 * n)
        if n == 2:
            w.mark("A", "t", 10)
        if n == 4:
            w.add("swap", status="committed", data={"move": "/clear A", "outcome": "committed"})
    command = w.prompt("/context")  # liminal answers it: never a turn of the model's
    w.turn_of("prompt 7", "ok", 500)
    w.add("swap", status="committed", data={"move": "/undo", "outcome": "committed"})
    shown = conversation(w.messages)
    prompts = {m.text: m.id for m in shown if m.kind == "user"}
    # /clear A took out turns 3 and 4, /undo turn 7; the session /undo wrote holds the last 2 of
    # those left, after a summary.
    seen = views.seen_states(shown, {command.id}, head=2, summary_before=True)
    assert {text: seen.get(i) for text, i in prompts.items()} == {
        "prompt 1": "summarised", "prompt 2": "summarised", "prompt 3": "cleared", "prompt 4": "cleared",
        "prompt 5": "context", "prompt 6": "context", "/context": None, "prompt 7": "undone"}
    # A prompt since the last move is the CLI's own, in the context whether or not the file has
    # it yet (counted from the file's end, turn 8 under way shifted every mark by one); without
    # the file, what the last move kept is not known, and what came since still is.
    w.prompt("prompt 8")
    shown = conversation(w.messages)
    seen = views.seen_states(shown, {command.id}, head=2, summary_before=True)
    assert [seen[m.id] for m in shown if m.kind == "user" and m.text in ("prompt 2", "prompt 5", "prompt 8")] \
        == ["summarised", "context", "context"]
    seen = views.seen_states(shown, {command.id}, head=None, summary_before=False)
    assert [seen[m.id] for m in shown if m.kind == "user" and m.text in ("prompt 5", "prompt 8")] == ["unknown", "context"]
    # /clear: nothing before it; without the file, nothing said of what is left.
    w.add("swap", status="committed", data={"move": "/clear", "outcome": "committed"})
    seen = views.seen_states(conversation(w.messages), {command.id}, head=None, summary_before=False)
    assert seen[prompts["prompt 5"]] == "cleared" and seen[prompts["prompt 1"]] == "cleared"


def test_savings_against_auto_compact() -> None:
    view = flux_view()
    saved = view["savings"]
    # Without the swaps the context would have reached 167k and compacted once.
    assert saved["compactions"] == 1 and saved["ceiling"] == 167_000
    assert saved["auto_compact"] > saved["made"] and saved["saved"] == saved["auto_compact"] - saved["made"]
    assert saved["mean_context"] < saved["mean_context_auto"]
    # A thread liminal never moved costs what it would have.
    w = fixture.Writer("t", "c", 0.0)
    for n in range(1, 6):
        w.turn_of(f"p{n}", "ok", 10_000 + 1000 * n, calls=(9_000 + 1000 * n,))
    calls = views.points(w.messages, turn_numbers(w.messages, ()))
    same = views.savings(calls, [], 167_000, 300.0)
    assert same is not None and same["saved"] == 0
    assert views.savings(calls[:1], [], 167_000, 300.0) is None


def test_savings_of_a_thread_on_the_hours_cache_price_its_writes_at_2x() -> None:
    """The swaps' decisions say the thread's cache lives an hour (the CLI's records): each
    rebuild wrote the prompt at 2x, not 1.25x, and the estimate of what liminal saved says so
    (before, it priced every thread at the 5-minute cache, and a 1-hour one saved less than shown)."""
    writer, _, _, _ = fixture.flux_thread()
    shown = views.conversation(writer.messages)
    points = views.points(shown, turn_numbers(shown, ()))
    orders = [p.order for p in points]
    committed = [views.move_view(m, views.at_call(orders, m.order), None) for m in shown
                 if m.kind == "swap" and m.status == "committed"]
    assert len(points) == 36 and committed
    short = views.savings(points, committed, 167_000, 300.0)
    hour = views.savings(points, [{**m, "cache_life": 3600.0} for m in committed], 167_000, 300.0)
    assert short is not None and hour is not None
    assert hour["made"] > short["made"] and hour["auto_compact"] > short["auto_compact"]
    assert hour["saved"] < short["saved"]  # liminal rebuilds more often than the CLI compacts


def test_the_models_summaries_are_paid_on_liminals_side() -> None:
    """A swap's record prices the model's summary of its cycle (``swap.summaries``, on by
    default: a side session the store never sees); what liminal saved counted none of it, and
    overstated the saving by every summary (found making the summaries the default). Each
    summary made is paid at the price its swap's record gives; a cycle whose record priced one
    that was never made (its context jumped past the trigger) pays none, and a summary since the
    last swap waits for its own."""
    writer, _, update, _ = fixture.flux_thread()
    from liminal.store.records import merge_thread

    thread = merge_thread(None, update)
    without = views.thread_view(thread, writer.messages, (), head=None, summary_before=False, cut={}, terms=TERMS)
    priced = [dataclasses.replace(m, data={**m.data, "cost": {**(m.data.get("cost") or {}), "summary": 9_000.0}})
              if m.kind == "swap" else m for m in writer.messages]
    first, second = (m["time"] for m in without["moves"] if m["move"] == "swap")
    made = [first - 5, second + 5]  # one for the first swap, none for the second, one since
    view = views.thread_view(thread, priced, (), head=None, summary_before=False, cut={},
                             terms=dataclasses.replace(TERMS, summaries=made))
    assert [m["summary"] for m in view["moves"] if m["move"] == "swap"] == [9_000.0, 9_000.0]
    saved, before = view["savings"], without["savings"]
    assert saved["summaries"] == 9_000 and before["summaries"] == 0
    assert saved["made"] == before["made"] + 9_000 and saved["saved"] == before["saved"] - 9_000
    both = views.thread_view(thread, priced, (), head=None, summary_before=False, cut={},
                             terms=dataclasses.replace(TERMS, summaries=[first - 5, first + 5]))["savings"]
    assert both["summaries"] == 18_000


def test_a_cut_tool_output_carries_its_recall_keys() -> None:
    writer, _, update, _ = fixture.flux_thread()
    from liminal.store.records import merge_thread

    view = views.thread_view(merge_thread(None, update), writer.messages, (), head=None, summary_before=False,
                             cut={"toolu_fact": ["KEY"]}, terms=TERMS)
    tools = [m for t in view["transcript"]["turns"] for m in t["messages"] if m["kind"] == "tool_call"]
    assert tools[0]["keys"] == ["KEY"] and tools[0]["more"] is True  # 42 lines: the head only
    assert all(not m["keys"] for m in tools[1:])


def test_a_long_transcript_is_sent_a_window_at_a_time() -> None:
    messages, update = fixture.long_thread(200)
    from liminal.store.records import merge_thread

    thread = merge_thread(None, update)

    def window(**kw: object) -> dict:
        view = views.thread_view(thread, messages, (), head=None, summary_before=False, cut={}, terms=TERMS,
                                 window=views.Window(**kw))  # type: ignore[arg-type]
        assert view["turn_count"] == 200 and len(view["points"]) == 600  # the chart has them all
        return view["transcript"]

    last = window()
    assert (last["lo"], last["hi"], last["count"]) == (140, 200, 200)
    assert [t["n"] for t in last["turns"]] == list(range(141, 201))
    found = window(at=messages[30].id)  # turn 4's (seven messages a turn, a swap every 25)
    assert found["lo"] == 0 and found["turns"][3]["messages"]
    assert window(turn=100)["turns"][5]["n"] == 100
    assert [t["n"] for t in window(lo=10, hi=12)["turns"]] == [11, 12]
    assert window(lo=500)["turns"] == []


# -- the HTTP rules, and a store that is only read ---------------------------------------------


def request(path: str, **headers: str) -> Request:
    return Request(path, Headers(list(headers.items())))


@pytest.fixture
async def dashboard(tmp_path: Path) -> Dashboard:
    home = tmp_path / "home"
    home.mkdir()
    await fixture.build(home / "liminal.db")
    return Dashboard(load({"home": home}, env={}), "secret-token")


async def test_data_needs_the_token_once_and_no_foreign_origin(dashboard: Dashboard) -> None:
    api = "/dashboard/api/threads"
    good = "Bearer secret-token"
    assert (await dashboard.answer(request(api))).status_code == 401
    assert (await dashboard.answer(request(api, Authorization="Bearer nope"))).status_code == 401
    assert (await dashboard.answer(request(api + "?token=secret-token&token=secret-token"))).status_code == 400
    assert (await dashboard.answer(request(api + "?token=secret-token", Authorization=good))).status_code == 400
    foreign = request(api, Authorization=good, Origin="http://evil.example", Host="127.0.0.1:8765")
    assert (await dashboard.answer(foreign)).status_code == 403
    # Its own page's origin, on loopback, is the dashboard's; the same origin on another name is not.
    own = request(api, Authorization=good, Origin="http://127.0.0.1:8765", Host="127.0.0.1:8765")
    assert (await dashboard.answer(own)).status_code == 200
    rebound = request(api, Authorization=good, Origin="http://evil.example:8765", Host="evil.example:8765")
    assert (await dashboard.answer(rebound)).status_code == 403
    answer = await dashboard.answer(request(api + "?token=secret-token"))
    assert answer.status_code == 200 and len(orjson.loads(answer.body)) == 2
    await dashboard.aclose()


async def test_the_page_itself_holds_no_data_and_is_served_without_the_token(dashboard: Dashboard) -> None:
    page = await dashboard.answer(request("/dashboard/"))
    assert page.status_code == 200 and b"app.js" in page.body
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert (await dashboard.answer(request("/dashboard/app.js"))).status_code == 200
    assert (await dashboard.answer(request("/dashboard/../liminal.db"))).status_code == 404
    assert (await dashboard.answer(request("/dashboard/api/nothing", Authorization="Bearer secret-token"))).status_code == 404
    await dashboard.aclose()


async def test_no_store_is_an_answer_not_a_crash(tmp_path: Path) -> None:
    dashboard = Dashboard(load({"home": tmp_path / "nowhere"}, env={}), "t")
    answer = await dashboard.answer(request("/dashboard/api/threads", Authorization="Bearer t"))
    assert answer.status_code == 503 and b"the store cannot be read" in answer.body
    assert not (tmp_path / "nowhere" / "liminal.db").exists()  # nothing made on the way
    await dashboard.aclose()


async def test_the_store_is_opened_read_only(tmp_path: Path) -> None:
    db = tmp_path / "liminal.db"
    await fixture.build(db)
    before = db.stat().st_mtime_ns, db.read_bytes()
    # The store the dashboard itself opens (``Reader.store``): it lists, and refuses a write.
    dashboard = Dashboard(load({"home": tmp_path}, env={}), "t")
    try:
        store = await dashboard.reader.store()
        assert len(await store.threads()) == 3  # the archived one too
        with pytest.raises(StoreError, match="readonly"):
            await store.write(Batch(threads=[ThreadUpdate("x", 1.0, title="x")]))
    finally:
        await dashboard.aclose()
    assert (db.stat().st_mtime_ns, db.read_bytes()) == before
    with pytest.raises(StoreError, match="no store"):
        await SqliteStore.open(tmp_path / "absent.db", readonly=True)
    assert not (tmp_path / "absent.db").exists()


async def test_a_request_that_fails_inside_says_so_in_words(dashboard: Dashboard) -> None:
    """An error inside the dashboard answered 500 with its class's name (``KeyError: see
    liminal's log``): the page shows the body to a person."""
    async def broken(route: str, query: dict[str, str]) -> Any:
        raise KeyError("thread")

    dashboard._data = broken  # type: ignore[method-assign]
    answer = await dashboard.answer(request("/dashboard/api/threads", Authorization="Bearer secret-token"))
    assert answer.status_code == 500
    assert orjson.loads(answer.body) == {"error": "an error inside liminal: its log has the details"}
    await dashboard.aclose()
