"""liminal's tools for the model: its MCP server added to every session the proxy forwards.

A component. Its request hook amends each client ``session/new``, ``session/load``,
``session/resume`` and ``session/fork`` (``Router.add_request_hook``): ``mcpServers`` gains one
server named ``liminal`` (``python -m liminal.mcp``), in place of any the client named so. The
swap manager keeps the servers of the request as forwarded (the taps see the amended request),
so the sessions it resumes or opens during a swap, a recycle or a command carry the server too.

A server for a session that exists is told its thread (``--thread``). One for a ``session/new``
cannot be, the agent names the session in its answer: it gets a nonce (``--bind``), and when the
answer comes this component writes which thread the nonce is for (``liminal.mcp.link``).

When a thread's turn ends, the slash commands the model left during it (its ``slash`` tool) are
handed to the command center, which runs them as if the user had typed them then.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liminal import log
from liminal.acp import jsonrpc
from liminal.acp.port import Component
from liminal.acp.router import Local
from liminal.kernel.threads import ThreadModel
from liminal.mcp import link

logger = log.get("liminal.modeltools")

SERVER_NAME = "liminal"
OPENS_SESSION = ("session/new", "session/fork")
NAMES_SESSION = ("session/load", "session/resume")
# What the server needs of liminal's own environment to find the same home, config and code.
PASSED_ENV = ("PYTHONPATH", "LIMINAL_")


def server_spec(home: Path, config_file: Path | None, *, thread: str | None = None,
                nonce: str | None = None) -> dict[str, Any]:
    """An ACP ``McpServer`` (stdio) that starts liminal's MCP server."""
    args = ["-m", "liminal.mcp", "--home", str(home)]
    if config_file is not None:
        args += ["--config", str(config_file)]
    args += ["--thread", thread] if thread is not None else ["--bind", nonce or ""]
    env = [{"name": k, "value": absolute_paths(v) if k == PASSED_ENV[0] else v}
           for k, v in sorted(os.environ.items())
           if k == PASSED_ENV[0] or k.startswith(PASSED_ENV[1])]
    return {"name": SERVER_NAME, "command": sys.executable, "args": args, "env": env}


def absolute_paths(search_path: str) -> str:
    """A PYTHONPATH as this process reads it, for one that starts in another folder (the agent
    starts the server in the session's): each relative entry made absolute."""
    if not search_path:
        return search_path
    return os.pathsep.join(str(Path(entry).absolute()) for entry in search_path.split(os.pathsep))


class ModelTools(Component):
    def __init__(self, home: Path, config_file: Path | None = None,
                 on_slash: Callable[[link.SlashRequest], None] | None = None, *,
                 threads: ThreadModel | None = None) -> None:
        self.home = home
        self.config_file = config_file
        self.on_slash = on_slash
        self._nonces: dict[Any, str] = {}  # session/new request id -> nonce, until answered
        # Told of sessions opened and turn ends by the thread model (``liminal.kernel.threads``).
        self.model = threads or ThreadModel()
        self.model.on_opened.append(self._opened)
        self.model.on_turn_end.append(self._turn_end)
        self.model.on_open_failed.append(self._open_failed)

    def parts(self) -> list[ThreadModel]:
        return [self.model]

    async def run(self, port: object) -> None:
        """Once, at start: bind files older than a month go (``link.sweep``)."""
        import anyio.to_thread

        removed = await anyio.to_thread.run_sync(link.sweep, self.home)
        if removed:
            logger.info("old MCP bind files removed", count=removed)

    # -------------------------------------------------------------- the router's side

    def request_hooks(self) -> list[tuple[tuple[str, ...], Callable[..., Local | dict[str, Any] | None]]]:
        return [(OPENS_SESSION + NAMES_SESSION, self._with_server)]

    def _with_server(self, method: str, message: dict[str, Any], thread: str | None) -> dict[str, Any] | None:
        params = message.get("params")
        if not isinstance(params, dict) or "id" not in message:
            return None
        if method in OPENS_SESSION:
            nonce = link.new_nonce()
            self._nonces[jsonrpc.id_key(message["id"])] = nonce
            spec = server_spec(self.home, self.config_file, nonce=nonce)
        elif isinstance(params.get("sessionId"), str) and link.safe(params["sessionId"]):
            spec = server_spec(self.home, self.config_file, thread=params["sessionId"])
        else:
            return None
        servers = params.get("mcpServers")
        theirs = [s for s in servers if not (isinstance(s, dict) and s.get("name") == SERVER_NAME)] \
            if isinstance(servers, list) else []
        return {**message, "params": {**params, "mcpServers": [*theirs, spec]}}

    # -------------------------------------------------------------- the thread model's side

    def _opened(self, thread: str, method: str, key: Any, by_liminal: bool) -> None:
        nonce = self._nonces.pop(key, None) if method in OPENS_SESSION else None
        if nonce is not None and link.safe(thread):
            try:
                link.bind(self.home, nonce, thread)
            except OSError as exc:  # the tools say they are not bound; the session works
                logger.warning("cannot bind liminal's MCP server to its thread", error=str(exc))

    def _open_failed(self, method: str, key: Any) -> None:
        self._nonces.pop(key, None)  # no session: nothing for the nonce to name

    def _turn_end(self, thread: str, ok: bool) -> None:
        # Told inside the flush that delivered the answer, not in a task: the model's commands
        # must reach the command center's queue before the user's next command does (a /marks
        # right after the turn sees the mark the model asked for). A directory listing once
        # per turn end.
        if self.on_slash is not None:
            for request in link.take_slash(self.home, thread):
                self.on_slash(request)
