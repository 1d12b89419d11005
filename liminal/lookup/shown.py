"""How a thread and its messages read to a person, shared by the commands that print them
(``liminal history``, ``liminal threads``) and the dashboard: the CLI's name in a word, a tool
call's output once."""

from __future__ import annotations

from typing import Any


def cli_name(harness: str) -> str:
    """The CLI behind a thread, in a word (``claude``, ``codex``), from the name its adapter
    gave (``@agentclientprotocol/claude-agent-acp``); another adapter's name without its scope."""
    from liminal.harness.base import guess

    if not harness:
        return "-"
    return guess([harness], ["claude", "codex", "gemini"]) or harness.rsplit("/", 1)[-1][:20]


def tool_output(data: dict[str, Any]) -> str:
    """A tool call's output, once: the content the adapter gave to show, else its raw output.
    (Both carry the same output; a Markdown fence around it is left out.)"""
    from liminal.ingest.derive import content_text

    parts = []
    for item in data.get("content") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "content":
            parts.append(_unfenced(content_text(item.get("content"))))
        elif item.get("type") == "diff":
            parts.append(f"diff {item.get('path', '')}\n{item.get('newText') or ''}")
    if any(parts):
        return "\n".join(p for p in parts if p)
    raw = data.get("rawOutput")
    if isinstance(raw, str):
        return _unfenced(raw)
    if raw is None:
        return ""
    texts = _texts(raw)
    if texts:
        return "\n".join(texts)
    import orjson

    return orjson.dumps(raw).decode(errors="replace")


def _texts(value: Any) -> list[str]:
    """The ``text`` of MCP content blocks anywhere in a raw output (an MCP tool's answer)."""
    if isinstance(value, dict):
        if value.get("type") == "text" and isinstance(value.get("text"), str):
            return [value["text"]]
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def _unfenced(text: str) -> str:
    lines = text.strip("\n").splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1])
    return text
