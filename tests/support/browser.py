"""Headless Chromium for the dashboard's browser tests (tests/browser, and the acceptance test
tests/acceptance/test_dashboard.py; ``bench/dashboard.py`` launches the same): Debian's
``chromium`` (never a browser Playwright downloads: there is none to fetch), driven by
Playwright's Python package. Its fixtures (``browser``, ``page``, ``artifacts``) are a pytest
plugin (``tests/conftest.py``); ``start`` runs ``liminal dashboard`` or ``liminal serve``, and
``get`` asks it for data as a program would.

Missing locally (no ``/usr/bin/chromium``, or no ``playwright`` package), the tests skip with the
reason; under ``CI=true`` they fail instead, as the acceptance tests do for a missing adapter
(``.ci/run`` installs ``chromium``). Screenshots go to ``$LIMINAL_TEST_ARTIFACTS/dashboard``, by
default ``test-artifacts/dashboard`` in the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest

from tests.support.proxy_process import child_env

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("LIMINAL_TEST_CHROMIUM", "/usr/bin/chromium")
# Flags without which Chromium reaches for the network from a closed machine and stalls.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


def require_browser() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(f"{reason} (CI=true: the browser tests must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for a module's tests. Not for the session: Playwright's sync API keeps an
    event loop running in the main thread while it is open, and the anyio tests that run after
    this module would find it there."""
    require_browser()
    from playwright.sync_api import sync_playwright

    # (Playwright starts it with a new empty profile of its own: no --user-data-dir here.)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    one = context.new_page()
    errors: list[str] = []
    one.on("pageerror", lambda exc: errors.append(str(exc)))
    yield one
    context.close()
    assert not errors, errors  # a script error on any page fails its test


@pytest.fixture(scope="session")
def artifacts() -> Path:
    folder = Path(os.environ.get("LIMINAL_TEST_ARTIFACTS") or REPO / "test-artifacts") / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Running:
    """``liminal dashboard`` or ``liminal serve`` as a process, on a free loopback port."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, home: Path, log: Path) -> None:
        self.proc, self.port, self.home, self.log = proc, port, home, log

    @property
    def token(self) -> str:
        return (self.home / "serve-token").read_text().strip()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/dashboard/"

    def enter(self, page: Any, route: str = "#/") -> None:
        """Open the address ``liminal dashboard`` prints (the token in its fragment), then go
        to ``route`` as a click on a link would."""
        page.goto(f"{self.base}#token={self.token}")
        # (Locators, never wait_for_function: the page's policy refuses the eval it needs.)
        page.locator("h1", has_text="Threads").wait_for()
        assert "token" not in page.url  # it left the address bar
        if route != "#/":
            page.evaluate("route => { location.hash = route; }", route)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start(tmp: Path, *argv: str, **env: str) -> Running:
    environment = child_env(tmp, **env)
    home = Path(environment["LIMINAL_HOME"])
    log = tmp / "server.log"
    proc = subprocess.Popen([sys.executable, "-m", "liminal", *argv], env=environment,
                            stdout=subprocess.PIPE, stderr=log.open("wb"))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"no port from liminal {argv[0]}: {log.read_text()}")
    return Running(proc, int(line), home, log)


def get(running: Running, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """A request as a program sends it: the status and the JSON answer."""
    request = Request(f"{running.base}api/{path}", headers=headers or {})
    try:
        with urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except HTTPError as refused:
        return refused.code, json.loads(refused.read())
