"""Who owes whom an answer, as the router (``liminal.acp.router``) keeps it: the client's
requests the agent owes, those liminal keeps to answer itself, the agent's requests the client
owes, and liminal's own requests the agent owes. Keys are ``jsonrpc.id_key`` of the ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Pending:
    method: str
    thread_id: str | None
    id_json: bytes | None  # exact id bytes, kept only when the parsed id cannot be trusted
    message_id: str | None = None  # a prompt's: its user message's (rule 10)
    private: bool = False  # rule 11: liminal's own request about a side session


class Owed:
    def __init__(self) -> None:
        self.client: dict[Any, Pending] = {}  # client requests the agent owes
        self.local: dict[Any, Pending] = {}  # client requests kept for ``answer_local``
        self.agent: dict[Any, tuple[str, str | None]] = {}  # agent requests -> (method, thread)
        self.own: dict[str, Pending] = {}  # liminal's own requests (rule 3)

    def prompt_in_flight(self, thread_id: str) -> bool:
        return any(p.method == "session/prompt" and p.thread_id == thread_id for p in self.client.values())

    def client_ids(self) -> set[Any]:
        return set(self.client) | set(self.local)

    def client_methods(self) -> list[str]:
        return [p.method for p in (*self.client.values(), *self.local.values())]

    def agent_requests(self) -> list[tuple[Any, str]]:
        return [(key, method) for key, (method, _) in self.agent.items()]

    def agent_request_open(self, thread_id: str) -> bool:
        return any(thread == thread_id for _, thread in self.agent.values())
