"""``liminal serve`` as a real process with the scripted agent behind it, for the integration
tests: start one on a free loopback port (``serve``), connect to it, and stop what a test
started (``Servers``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.support.proxy_process import child_env, scripted_agent_argv


class Served:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, home: Path) -> None:
        self.proc = proc
        self.port = port
        self.home = home

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/acp"

    @property
    def token(self) -> str:
        return (self.home / "serve-token").read_text().strip()

    def connect(self, **kwargs: Any) -> ClientConnection:
        headers = kwargs.pop("headers", {"Authorization": f"Bearer {self.token}"})
        client: ClientConnection = connect(kwargs.pop("url", self.url), additional_headers=headers,
                                           open_timeout=20, **kwargs)
        return client

    def stop(self) -> None:
        """Killed if it still runs (a test that stops it itself has waited for it already)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def serve(tmp_path: Path, *options: str, config: str = "", agent_flags: tuple[str, ...] = (),
          env: dict[str, str] | None = None, agent: list[str] | None = None) -> Served:
    """``liminal serve --listen 127.0.0.1:0`` with ``config`` as its config file, logging to
    ``tmp_path/serve.log``, ``env`` added to its environment; the scripted agent (with
    ``agent_flags``) logs beside it, or ``agent`` is the agent command."""
    env = child_env(tmp_path, **(env or {}))
    home = Path(env["LIMINAL_HOME"])
    if config:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(config)
    proc = subprocess.Popen(
        [sys.executable, "-m", "liminal", "serve", "--listen", "127.0.0.1:0", "--print-port",
         *options, "--", *(agent or scripted_agent_argv(*agent_flags))],
        env=env, stdout=subprocess.PIPE, stderr=open(tmp_path / "serve.log", "wb"))  # noqa: SIM115
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), (tmp_path / "serve.log").read_text()
    return Served(proc, int(line), home)


class Servers:
    """What a test started, stopped at its end however it ended (a fixture's yield value)."""

    def __init__(self) -> None:
        self.started: list[Served] = []
        self.clients: list[Any] = []

    def serve(self, tmp_path: Path, *options: str, **kwargs: Any) -> Served:
        server = serve(tmp_path, *options, **kwargs)
        self.started.append(server)
        return server

    def close(self) -> None:
        for client in self.clients:
            try:
                client.close()
            except Exception:
                pass
        for server in self.started:
            server.stop()


def rpc(ws: ClientConnection, rpc_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send a request and wait for its answer (what comes before it is skipped)."""
    ws.send(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}))
    while True:
        message = json.loads(ws.recv(timeout=30))
        if message.get("id") == rpc_id and "method" not in message:
            return dict(message)
