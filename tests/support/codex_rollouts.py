"""Synthetic Codex rollouts in both dialects seen on disk (docs/formats.md, "Codex rollouts"):
0.137 (``codex-zed``: ``user_message`` / ``agent_message`` events) and 0.166 (``codex-agent``:
``ordinal`` on every line, ``world_state``, ``item_completed``, ``token_usage_record``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Call:
    command: str
    output: str


@dataclass(frozen=True)
class TurnSpec:
    prompt: str
    calls: Sequence[Call] = ()
    answer: str = "done"
    reasoning: bool = False
    complete: bool = True


class RolloutBuilder:
    def __init__(self, dialect: str = "0.137", session_id: str | None = None, cwd: str = "/p") -> None:
        self.dialect = dialect
        self.session_id = session_id or str(uuid.uuid4())
        self.cwd = cwd
        self.lines: list[dict[str, Any]] = []
        self._calls = 0
        self._tokens = 9000
        meta: dict[str, Any] = {"id": self.session_id, "timestamp": "2026-11-25T05:49:08.582Z",
                                "cwd": cwd, "originator": "test", "cli_version": dialect,
                                "source": "unknown", "model_provider": "fake",
                                "base_instructions": {"text": "You are Codex."}}
        if dialect == "0.166":
            meta = {"session_id": self.session_id, **meta, "history_mode": "paginated"}
        self._add("session_meta", meta)

    def _add(self, kind: str, payload: dict[str, Any], **extra: Any) -> None:
        line: dict[str, Any] = {"timestamp": "2026-11-25T05:49:08.629Z"}
        if self.dialect == "0.166":
            line["ordinal"] = len(self.lines)
        line.update({"type": kind, "payload": payload, **extra})
        self.lines.append(line)

    def _item(self, payload: dict[str, Any]) -> None:
        self._add("response_item", payload)

    def _event(self, payload: dict[str, Any]) -> None:
        self._add("event_msg", payload)

    def _message(self, role: str, text: str) -> None:
        kind = "output_text" if role == "assistant" else "input_text"
        self._item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})

    def turn(self, spec: TurnSpec) -> RolloutBuilder:
        turn_id = str(uuid.uuid4())
        first = not any(line["type"] == "turn_context" for line in self.lines)
        self._event({"type": "task_started", "turn_id": turn_id, "model_context_window": 258400})
        if first:
            self._message("developer", "<permissions instructions>sandboxed</permissions instructions>")
            self._message("user", f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n</environment_context>")
            if self.dialect == "0.166":
                self._add("world_state", {"full": True, "state": {"model": "gpt-5.5"}})
        self._add("turn_context", {"turn_id": turn_id, "cwd": self.cwd, "model": "gpt-5.5"})
        if self.dialect == "0.166":
            self._event({"type": "thread_settings_applied", "thread_id": self.session_id})
        self._message("user", spec.prompt)
        if self.dialect == "0.137":
            self._event({"type": "user_message", "message": spec.prompt, "images": []})
        if spec.reasoning:
            self._item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "hmm"}],
                        "encrypted_content": "gAAAA" + "x" * 200})
        for call in spec.calls:
            self._calls += 1
            call_id = f"call_{self._calls:04d}"
            self._item({"type": "function_call", "name": "exec_command", "call_id": call_id,
                        "arguments": json.dumps({"cmd": call.command, "login": False})})
            if not spec.complete and call is spec.calls[-1]:
                return self  # cut off mid-call: the CLI is still running it
            self._item({"type": "function_call_output", "call_id": call_id, "output": call.output})
            if self.dialect == "0.166":
                self._event({"type": "item_completed", "thread_id": self.session_id,
                             "item": {"type": "CommandExecution", "id": call_id}})
        self._tokens += 100 + sum(len(c.output) // 4 for c in spec.calls)
        self._event({"type": "token_count", "info": {
            "total_token_usage": {"total_tokens": self._tokens * 3},
            "last_token_usage": {"input_tokens": self._tokens, "total_tokens": self._tokens}}})
        if self.dialect == "0.166":
            self._add("token_usage_record", {"thread_id": self.session_id, "usage": {}})
        if self.dialect == "0.137":
            self._event({"type": "agent_message", "message": spec.answer})
        self._message("assistant", spec.answer)
        if spec.complete:
            self._event({"type": "task_complete", "turn_id": turn_id, "last_agent_message": spec.answer})
        return self

    def bytes(self) -> bytes:
        return b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in self.lines)

    def write(self, codex_home: Path, day: str = "2026/11/25") -> Path:
        folder = codex_home / "sessions" / day
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rollout-{day.replace('/', '-')}T05-49-08-{self.session_id}.jsonl"
        path.write_bytes(self.bytes())
        return path


def conversation(dialect: str, turns: int, output_lines: int = 80) -> RolloutBuilder:
    """``turns`` turns, every other one with a long tool output, some with reasoning."""
    builder = RolloutBuilder(dialect)
    for n in range(turns):
        calls = [Call(f"seq {n} {n + output_lines}", "\n".join(str(k) for k in range(n, n + output_lines)))] \
            if n % 2 else []
        builder.turn(TurnSpec(f"question {n}: what about item {n}?", calls, f"answer {n}. We decided to go on.",
                              reasoning=n % 3 == 0))
    return builder
