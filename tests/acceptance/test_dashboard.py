"""The dashboard over what the real Claude Code, Codex and Gemini CLI left, read in headless Chromium as a
person would, while the thread goes on through ``liminal acp``: turns that each read 2,000 lines
until three swaps have cut the older outputs, then ``/clear MARK``, ``/undo`` and more turns.
The thread is listed once; a cut output is found by search and its original opened by its
recall key; the chart draws the five moves in their order and the transcript marks the turns
the model no longer sees, updating as the turns end."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fixtures.harness import Adapter, Rig
from tests.acceptance.conftest import adapter_fixture
from tests.support.acp_thread import (
    BIG,
    FIRST,
    committed,
    configure,
    liminal_client,
    said,
    scenario,
)
from tests.support.browser import Running, get, require_browser, start

adapter = adapter_fixture(["claude-agent", "codex-agent", "gemini"])


def moving(rig: Rig) -> None:
    """Swaps after about two turns, each keeping the last turn whole and the outputs before it
    cut to recall markers (a middle band, as tests/acceptance/test_recall.py sets it)."""
    configure(rig, high=20_000, target=12_000, middle=4000)


def recorded(running: Running, thread: str, moves: int) -> None:
    """Wait until the store (the index worker writes it behind the turns) has the thread with
    ``moves`` moves."""
    headers = {"Authorization": f"Bearer {running.token}"}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, rows = get(running, "threads", headers)
        if status == 200 and any(r["id"] == thread and r["moves"] >= moves for r in rows):
            return
        time.sleep(0.3)
    raise AssertionError(f"the store never had {moves} moves of {thread}: {rows}")


def test_the_dashboard_shows_what_liminal_did_to_a_real_thread(adapter: Adapter, rig: Rig, page: Any,
                                                              artifacts: Path) -> None:
    require_browser()
    # Gemini CLI's shell tool gives the model the first 585 lines of seq's 2,001 (docs/facts.md).
    tail, needle = ("10583\n10584", "10498") if adapter.name == "gemini" else ("11999\n12000", "11998")
    rig.server.script = scenario()
    moving(rig)
    env = rig.home.env()
    (rig.home.root / "dashboard").mkdir()
    running = start(rig.home.root / "dashboard", "dashboard", "--listen", "127.0.0.1:0", "--print-port",
                    **{k: v for k, v in env.items() if k in ("LIMINAL_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "HOME")})
    try:
        with liminal_client(rig) as client:
            client.initialize()
            thread = client.new_session(rig.home.project)["sessionId"]
            said(client, thread, FIRST)
            assert "Mark M set" in said(client, thread, "/mark M")
            for text in BIG:
                said(client, thread, text)
                if len(committed(rig)) >= 3:
                    break
            assert len(committed(rig)) == 3, rig.stderr_tail()
            recorded(running, thread, 3)

            running.enter(page)
            rows = page.locator("#threads tbody tr")
            rows.first.wait_for()
            assert rows.count() == 1 and rows.first.get_attribute("data-id") == thread

            # An output the swaps cut: the transcript gives its key, and the key its original.
            running.enter(page, f"#/thread/{thread}")
            page.locator("#chart .move").first.wait_for(state="attached")
            assert page.locator("#chart .move.swap").count() == 3
            cut = page.locator(".msg.tool_call .cut").first
            cut.wait_for()
            cut.locator("button.recall").click()
            original = cut.locator(".recalled")
            original.wait_for()
            assert tail in original.inner_text()
            # Search finds such an output and opens its place in the transcript.
            page.fill("#search-box", needle)
            page.press("#search-box", "Enter")
            page.locator("#hits li").first.wait_for()
            page.locator("#hits li a").first.click()
            page.locator(".msg.focus mark").wait_for()  # the whole output, the words marked
            assert page.locator(".msg.focus mark").inner_text() == needle
            page.screenshot(path=str(artifacts / f"real-{adapter.name}-swaps.png"), full_page=True)

            # The person's moves, seen live on the open page.
            running.enter(page, f"#/thread/{thread}")
            page.locator("#chart .move").first.wait_for(state="attached")
            page.evaluate("window.notReloaded = true")
            assert "cleared back to mark M" in said(client, thread, "/clear M")
            said(client, thread, "gamma after clear")
            said(client, thread, "beta two")
            assert "out of the model's context" in said(client, thread, "/undo")
            said(client, thread, "delta after undo")
            client.settle()
            page.locator('#chart .move[data-move="/undo"]').wait_for(state="attached", timeout=120_000)
            page.locator("#transcript .msg.user", has_text="delta after undo").wait_for(timeout=120_000)
            assert page.evaluate("window.notReloaded") is True
        drawn = [line.get_attribute("data-move") for line in page.locator("#chart .move").all()]
        assert drawn == ["swap", "swap", "swap", "/clear M", "/undo"], drawn
        calls = [int(line.get_attribute("data-at") or -1) for line in page.locator("#chart .move").all()]
        assert calls == sorted(calls) and calls[0] > 0, calls
        assert page.locator("#chart .mark").count() == 1
        seen = {t.locator(".msg.user .text").first.inner_text(): t.get_attribute("data-seen")
                for t in page.locator("#transcript article").all() if t.locator(".msg.user").count()}
        # /clear M took out every turn after the mark, /undo "beta two"; the rest is in context.
        assert seen.get(FIRST) == "context" and seen.get("gamma after clear") == "context", seen
        assert seen.get(BIG[0]) == "cleared" and seen.get("beta two") == "undone", seen
        assert seen.get("delta after undo") == "context", seen
        assert page.get_attribute("#live", "class") == "on"
        page.screenshot(path=str(artifacts / f"real-{adapter.name}-moves.png"), full_page=True)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(artifacts / f"real-{adapter.name}.png"))
    finally:
        running.stop()
