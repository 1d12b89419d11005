"""Claude Code session files, written the way the CLI writes them, for tests without the CLI.

The scripted agent uses these (when ``$AGENT_CLAUDE_CONFIG_DIR`` is set) to keep a session file
per session as Claude Code would: a copy of a real fixture for a new session, and each turn
appended (the prompt, then a finished answer with usage) before the prompt is answered. That
lets the real swap harness (``liminal.harness.claude``) find, settle, rewrite and resume them
in tests that need many swaps quickly (the fault-injection trials).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "claude" / "zed-32.jsonl"


def session_path(config_dir: Path, cwd: str, session_id: str) -> Path:
    return config_dir / "projects" / re.sub(r"[^A-Za-z0-9]", "-", cwd) / f"{session_id}.jsonl"


def create(config_dir: Path, cwd: str, session_id: str, template: Path = FIXTURE) -> Path:
    path = session_path(config_dir, cwd, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = template.read_text(encoding="utf-8")
    old = json.loads(text.splitlines()[0])["sessionId"]
    path.write_text(text.replace(old, session_id), encoding="utf-8")
    return path


def _last_uuid(path: Path) -> str | None:
    for line in reversed(path.read_bytes().splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("uuid") and not record.get("isSidechain"):
            return str(record["uuid"])
    return None


def append_turn(path: Path, session_id: str, cwd: str, prompt: str, answer: str, context: int) -> None:
    parent = _last_uuid(path)
    user_uuid, answer_uuid = str(uuid.uuid4()), str(uuid.uuid4())
    common = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": session_id,
              "version": "2.1.44", "gitBranch": "HEAD", "timestamp": "2026-11-24T00:00:00.000Z"}
    user = {"parentUuid": parent, **common, "type": "user", "uuid": user_uuid,
            "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}}
    assistant = {"parentUuid": user_uuid, **common, "type": "assistant", "uuid": answer_uuid,
                 "requestId": f"req_{uuid.uuid4().hex[:20]}",
                 "message": {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message",
                             "role": "assistant", "model": "claude-test",
                             "content": [{"type": "text", "text": answer}], "stop_reason": None,
                             "usage": {"input_tokens": context, "cache_creation_input_tokens": 0,
                                       "cache_read_input_tokens": 0, "output_tokens": 5}}}
    with path.open("a", encoding="utf-8") as f:
        compact = {"separators": (",", ":"), "ensure_ascii": False}  # as Claude Code writes
        f.write(json.dumps(user, **compact) + "\n" + json.dumps(assistant, **compact) + "\n")
