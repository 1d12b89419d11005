"""The dashboard's thread page shows the thread's scratchpad (docs/memory.md), and a thread
without one shows no panel for it."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal.lookup import scratchpad
from liminal.store.sqlite import SqliteStore
from tests.support import dashboard_store as fixture
from tests.support.browser import Running, start

PAD = "the release codename is PLOVER-8812\nstaging port moved to 6543"


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Running]:
    home = tmp_path / "liminal-home"
    home.mkdir(mode=0o700)

    async def build() -> None:
        await fixture.build(home / "liminal.db")
        store = await SqliteStore.open(home / "liminal.db")
        try:
            await scratchpad.replace(store, fixture.FLUX, PAD, limit=4000, by="model")
        finally:
            await store.aclose()

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps an event loop in this one
        pool.submit(anyio.run, build).result()
    running = start(tmp_path, "dashboard", "--listen", "127.0.0.1:0", "--print-port",
                    CLAUDE_CONFIG_DIR=str(tmp_path / "claude"), CODEX_HOME=str(tmp_path / "codex"))
    try:
        yield running
    finally:
        running.stop()


def test_a_threads_page_shows_its_scratchpad(dashboard: Running, page: Any, artifacts: Path) -> None:
    dashboard.enter(page, f"#/thread/{fixture.FLUX}")
    panel = page.locator("#scratchpad")
    panel.wait_for()
    assert panel.locator("pre").inner_text() == PAD
    said = panel.locator("p").inner_text()
    assert said.startswith("62 characters, last written by the model at ") and "preamble" in said
    panel.screenshot(path=str(artifacts / "scratchpad.png"))
    dashboard.enter(page, f"#/thread/{fixture.CODEX}")
    page.locator("#thread-title", has_text="Tidy the parser").wait_for()
    assert page.locator("#scratchpad").count() == 0 and "null" not in page.locator("main").inner_text()
