"""How long the dashboard takes to serve a long thread (issue 26): its page and its data, over
HTTP from a running ``liminal dashboard``, and, where Debian's Chromium is installed, the time
from opening the thread's address to its chart and transcript on screen.

A SQLite store of one thread of TURNS turns (a prompt, a tool call with 40 lines of output, an
answer, three usage points, a swap every 25 turns: ``tests.support.dashboard_store.long_thread``)
and the three threads of the browser tests.

    .venv/bin/python bench/dashboard.py [--turns 1000] [--repeat 10] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.request import Request, urlopen

from liminal.store.records import Batch
from liminal.store.sqlite import SqliteStore
from tests.support import dashboard_store
from tests.support.browser import CHROMIUM, FLAGS

LONG = "44444444-4444-4444-8444-444444444444"


async def build(db: Path, turns: int) -> int:
    await dashboard_store.build(db)
    messages, update = dashboard_store.long_thread(turns, LONG)
    store = await SqliteStore.open(db)
    try:
        await store.write(Batch(messages=messages, threads=[update]))
    finally:
        await store.aclose()
    return len(messages)


def fetch(url: str, token: str | None) -> tuple[float, int]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    t0 = time.perf_counter()
    with urlopen(Request(url, headers=headers), timeout=60) as answer:
        size = len(answer.read())
    return time.perf_counter() - t0, size


def in_browser(base: str, token: str, repeat: int) -> list[float] | str:
    """Seconds from opening the thread's address to its chart and last turn drawn."""
    if not Path(CHROMIUM).exists():
        return f"no {CHROMIUM}"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "no playwright package"
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            for _ in range(repeat):
                page = browser.new_page()
                page.goto(f"{base}#token={token}")
                page.locator("h1", has_text="Threads").wait_for()
                t0 = time.perf_counter()
                page.evaluate("id => { location.hash = '#/thread/' + id; }", LONG)
                # (Locators: the page's policy refuses the eval a wait_for_function needs.)
                page.locator("#chart polyline").wait_for(state="attached", timeout=60_000)
                page.locator("#transcript article").first.wait_for(state="attached", timeout=60_000)
                times.append(time.perf_counter() - t0)
                page.close()
        finally:
            browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--smoke", action="store_true",
                        help="a small, quick run: does the script still work (its figures mean nothing)")
    args = parser.parse_args()
    if args.smoke:
        args.turns, args.repeat = 30, 1
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        home.mkdir(mode=0o700)
        db = home / "liminal.db"
        count = asyncio.run(build(db, args.turns))
        # The CLIs' folders are the run's own (empty): the machine's are never read.
        env = dict(os.environ, LIMINAL_HOME=str(home), CLAUDE_CONFIG_DIR=str(Path(folder) / "claude"),
                   CODEX_HOME=str(Path(folder) / "codex"))
        proc = subprocess.Popen([sys.executable, "-m", "liminal", "dashboard", "--listen", "127.0.0.1:0",
                                 "--print-port"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            token = (home / "serve-token").read_text().strip()
            base = f"http://127.0.0.1:{port}/dashboard/"
            fetch(f"{base}api/threads", token)  # the store opened, the files read once
            results: dict[str, list[tuple[float, int]]] = {"page (index.html, app.js, app.css)": [],
                                                          "thread data": [], "threads list": []}
            for _ in range(args.repeat):
                page = [fetch(base + name, None) for name in ("", "app.js", "app.css")]
                results["page (index.html, app.js, app.css)"].append(
                    (sum(t for t, _ in page), sum(s for _, s in page)))
                results["thread data"].append(fetch(f"{base}api/thread/{LONG}", token))
                results["threads list"].append(fetch(f"{base}api/threads", token))
            browser = in_browser(base, token, min(args.repeat, 5))
        finally:
            proc.terminate()
            proc.wait(20)
        print(f"store: a thread of {args.turns} turns ({count} messages) and 3 others, "
              f"{db.stat().st_size / 1e6:.1f} MB")
    for name, found in results.items():
        times = [t for t, _ in found]
        print(f"{name:36} median {statistics.median(times) * 1000:6.0f} ms   max {max(times) * 1000:6.0f} ms"
              f"   {found[0][1] / 1e3:8.0f} kB")
    if isinstance(browser, str):
        print(f"{'in Chromium, address to drawn':36} not measured: {browser}")
    else:
        print(f"{'in Chromium, address to drawn':36} median {statistics.median(browser) * 1000:6.0f} ms"
              f"   max {max(browser) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
