"""``liminal dashboard`` as a person starts it: the address with the token printed on stdout, a
listen address off loopback or already taken refused in one line (exit 2), SIGTERM a clean stop,
and no store yet an answer (503) rather than a store made; ``liminal serve`` says where its
dashboard is as it starts."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest

from tests.support.proxy_process import child_env


def dashboard(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "liminal", "dashboard", *args], env=child_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_it_prints_where_to_open_it_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = dashboard(tmp_path, "--listen", "127.0.0.1:0", "--print-port")
    assert proc.stdout is not None and proc.stderr is not None
    try:
        # On stdout, where a person looks for what a command prints (it was on stderr alone).
        first, said = printed(proc.stdout, 2)
        port = int(first)
        token = (tmp_path / "liminal-home" / "serve-token").read_text().strip()
        assert said.strip() == f"liminal dashboard: http://127.0.0.1:{port}/dashboard/#token={token}"
        request = Request(f"http://127.0.0.1:{port}/dashboard/api/threads",
                          headers={"Authorization": f"Bearer {token}"})
        with pytest.raises(HTTPError) as no_store:
            urlopen(request, timeout=30)
        assert no_store.value.code == 503 and "no store" in json.loads(no_store.value.read())["error"]
        assert not (tmp_path / "liminal-home" / "liminal.db").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 128 + signal.SIGTERM
        assert b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_listen_address_it_cannot_use_is_one_line(tmp_path: Path) -> None:
    for listen in ("0.0.0.0:8767", "nonsense"):
        done = subprocess.run([sys.executable, "-m", "liminal", "dashboard", "--listen", listen],
                              env=child_env(tmp_path), capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "loopback" in done.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "liminal", "dashboard", "--listen", f"127.0.0.1:{port}"],
                              env=child_env(tmp_path), capture_output=True, text=True, timeout=60)
    [line] = done.stderr.strip().splitlines()
    assert done.returncode == 2 and line.startswith(f"liminal dashboard: --listen '127.0.0.1:{port}' cannot be used: ")
    assert "address already in use" in line.lower(), line


def printed(stream: IO[bytes], count: int, seconds: float = 60) -> list[str]:
    """The next ``count`` lines of ``stream``, or the test fails saying what came (read in a
    thread: what the pipe's buffer holds already no ``select`` sees)."""
    import queue
    import threading

    came: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [came.put(stream.readline().decode().strip()) for _ in range(count)],
                     daemon=True).start()
    lines: list[str] = []
    try:
        while len(lines) < count:
            lines.append(came.get(timeout=seconds))
    except queue.Empty:
        raise AssertionError(f"only {lines} within {seconds} s") from None
    return lines


def test_serve_says_where_its_dashboard_is(tmp_path: Path) -> None:
    """``liminal serve`` serves the dashboard at ``/dashboard/`` and never said so. Its stdout is
    not a terminal here (a service manager's log): the address without the token, and where the
    token is."""
    from tests.support.served import serve

    served = serve(tmp_path)
    try:
        assert served.proc.stdout is not None
        lines = printed(served.proc.stdout, 2)
        token_file = served.home / "serve-token"
        assert lines == [
            f"liminal serve: ws://127.0.0.1:{served.port}/acp (token in {token_file})",
            f"liminal serve: the dashboard at http://127.0.0.1:{served.port}/dashboard/ "
            f"(the page asks for the token, in {token_file})"]
        assert token_file.read_text().strip() not in "\n".join(lines)
        with urlopen(f"http://127.0.0.1:{served.port}/dashboard/", timeout=30) as page:
            assert page.status == 200
    finally:
        served.stop()
