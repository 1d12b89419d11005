"""Literal Claude Code transcripts for tests, in the shapes of real 2.1.44 files.

``Transcript`` writes the lines Claude Code writes: one content block per assistant line, lines
of one API response sharing ``message.id``, each ``tool_result`` hanging off its own ``tool_use``
line (so parallel results sit off the pure parent chain), the next assistant line hanging off
the last result written, and usage that grows with the history.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

CWD = "/work/project"
SID = "0b5c7a10-1111-4a2b-9c3d-000000000001"


class Transcript:
    def __init__(self, session_id: str = SID) -> None:
        self.sid = session_id
        self.records: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.parent: str | None = None
        self.chars = 0

    def uuid(self) -> str:
        return f"00000000-0000-4000-8000-{next(self._ids):012d}"

    def _base(self, parent: str | None) -> dict[str, Any]:
        return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": CWD,
                "sessionId": self.sid, "version": "2.1.44", "gitBranch": "main"}

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        self.records.append(record)
        return record

    def prompt(self, text: str, **extra: Any) -> str:
        u = self.uuid()
        self.add({**self._base(self.parent), "type": "user", "message": {
            "role": "user", "content": [{"type": "text", "text": text}]}, "uuid": u,
            "timestamp": "2026-01-01T00:00:00.000Z", **extra})
        self.parent = u
        self.chars += len(text)
        return u

    def assistant(self, *blocks: dict[str, Any], parent: str | None = None) -> list[str]:
        """One API response, one line per block; returns the lines' uuids."""
        mid = f"msg_{next(self._ids):06d}"
        ctx = 1000 + self.chars // 4
        out: list[str] = []
        previous = parent if parent is not None else self.parent
        for block in blocks:
            u = self.uuid()
            self.add({**self._base(previous), "message": {
                "id": mid, "type": "message", "role": "assistant", "model": "claude-test",
                "content": [block], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": 3, "cache_creation_input_tokens": 0,
                          "cache_read_input_tokens": ctx, "output_tokens": 1}},
                "requestId": f"req_{mid}", "type": "assistant", "uuid": u,
                "timestamp": "2026-01-01T00:00:01.000Z"})
            previous = u
            out.append(u)
            self.chars += len(json.dumps(block))
        self.parent = previous
        return out

    def say(self, text: str) -> str:
        return self.assistant({"type": "text", "text": text})[0]

    def tools(self, calls: list[tuple[str, dict[str, Any], str]], *, order: list[int] | None = None,
              text: str | None = None, thinking: str | None = None) -> list[str]:
        """Parallel tool calls in one response, then their results (in ``order``)."""
        blocks: list[dict[str, Any]] = []
        if thinking is not None:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": "sig" * 10})
        if text is not None:
            blocks.append({"type": "text", "text": text})
        ids = [f"toolu_{next(self._ids):08d}" for _ in calls]
        blocks += [{"type": "tool_use", "id": i, "name": name, "input": tool_input}
                   for i, (name, tool_input, _) in zip(ids, calls, strict=True)]
        lines = self.assistant(*blocks)
        use_lines = lines[len(blocks) - len(calls):]
        for n in order if order is not None else range(len(calls)):
            u = self.uuid()
            output = calls[n][2]
            self.add({**self._base(use_lines[n]), "type": "user", "message": {
                "role": "user", "content": [{"tool_use_id": ids[n], "type": "tool_result",
                                             "content": output, "is_error": False}]},
                "uuid": u, "timestamp": "2026-01-01T00:00:02.000Z",
                "toolUseResult": {"stdout": output, "stderr": "", "interrupted": False},
                "sourceToolAssistantUUID": use_lines[n]})
            self.parent = u
            self.chars += len(output)
        return ids

    def turn(self, n: int, *, size: int = 2000, parallel: int = 1, think: bool = False,
             prose: int = 0) -> None:
        """A typical turn: a prompt, tool calls with output of ``size`` characters, a reply."""
        self.prompt(f"request number {n}: please check module m{n}")
        calls = [("Bash", {"command": f"cat m{n}_{i}.py", "description": "Show"},
                  "".join(f"line {j} of m{n}_{i}\n" for j in range(size // 16)))
                 for i in range(parallel)]
        self.tools(calls, text=f"Looking at m{n}.", thinking="hmm" if think else None)
        self.say(f"Module m{n} is fine. We decided to keep m{n} as it is." + " More words." * prose)

    def lines(self) -> list[bytes]:
        return [json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
                for r in self.records]

    def write(self, folder: Path, *, tail: bytes = b"") -> Path:
        """Write under ``folder/projects/-work-project/<sid>.jsonl`` (a CLAUDE_CONFIG_DIR)."""
        path = folder / "projects" / "-work-project" / f"{self.sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(self.lines()) + tail)
        return path


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
