"""Summarizers: what the ancient band becomes in the preamble.

The interface is one method over small digests of turns (no file access, no I/O), so an LLM
summarizer can sit behind it later. The default is extractive, offline and deterministic: the
same input always gives the same bytes, which keeps rewrites reproducible and testable. It keeps
what a resumed agent most needs and is cheapest to lose: every user request (verbatim while the
budget allows), the assistant's stated decisions, the files touched, the commands run, and where
the conversation was heading when the band ends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

PREAMBLE_INTRO = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\nSummary:\n"
)
_DECISION = re.compile(
    r"\b(decided|decision|will use|going to|chose|instead|root cause|the problem|fixed|"
    r"we should|plan is|conclusion|turns out)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_FILE_TOOLS = ("Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep")


@dataclass(frozen=True, slots=True)
class TurnDigest:
    number: int
    prompt: str
    replies: tuple[str, ...] = ()  # heads of the assistant's prose
    tools: tuple[tuple[str, str], ...] = ()  # (tool name, path or command)


class Summarizer(Protocol):
    def summarize(self, turns: Sequence[TurnDigest], previous: str | None, budget_chars: int) -> str:
        """Text for the preamble, at most about ``budget_chars`` characters."""
        ...


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _is_path(detail: str) -> bool:
    return "/" in detail or "." in detail.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class ExtractiveSummarizer:
    max_decisions: int = 40
    max_commands: int = 40
    max_files: int = 80

    def _facts(self, turns: Sequence[TurnDigest]) -> list[str]:
        """Decisions, files, commands: the part that does not depend on the prompt budget."""
        out: list[str] = []
        decisions: list[str] = []  # the latest ones matter most: collected from the end
        for turn in reversed(turns):
            for reply in reversed(turn.replies):
                for sentence in reversed(_SENTENCE.split(reply)):
                    if _DECISION.search(sentence):
                        decisions.append(f"- {_clip(sentence, 240)}")
                if len(decisions) >= self.max_decisions:
                    break
            if len(decisions) >= self.max_decisions:
                break
        decisions.reverse()
        if decisions:
            out.append("Decisions and findings (assistant's words):")
            out.extend(decisions)
        files: dict[str, None] = {}
        commands: dict[str, None] = {}
        for turn in turns:
            for name, detail in turn.tools:
                if not detail:
                    continue
                if name.removeprefix("mcp__acp__") in _FILE_TOOLS and _is_path(detail):
                    files.setdefault(detail, None)
                elif name.removeprefix("mcp__acp__") == "Bash":
                    commands.setdefault(_clip(detail.splitlines()[0], 120), None)
        if files:
            out.append("Files touched: " + ", ".join(list(files)[: self.max_files]))
        if commands:
            out.append("Commands run:")
            out.extend(f"- `{c}`" for c in list(commands)[: self.max_commands])
        return out

    def _sections(
        self, turns: Sequence[TurnDigest], previous: str | None, cap: int, facts: list[str]
    ) -> str:
        out: list[str] = []
        if previous:
            out.append("Earlier summary (carried over):\n" + previous.strip())
        if turns:
            out.append(f"What the user asked ({len(turns)} requests, in order):")
            out.extend(f"- {_clip(t.prompt, cap)}" for t in turns if t.prompt.strip())
        out.extend(facts)
        if turns:
            tail = turns[-1]
            where = tail.replies[-1] if tail.replies else ""
            out.append(
                f"Open thread at the end of this part: the user had asked: {_clip(tail.prompt, cap)}"
                + (f" The assistant last said: {_clip(where, 400)}" if where else "")
            )
        return "\n".join(out)

    def summarize(self, turns: Sequence[TurnDigest], previous: str | None, budget_chars: int) -> str:
        text = ""
        facts = self._facts(turns)
        for cap in (1000, 400, 160, 80, 40):
            text = self._sections(turns, previous, cap, facts)
            if len(text) <= budget_chars:
                return text
        # Still too long: the oldest requests go first; the carried summary is cut from its start.
        return _clip(text[len(text) - budget_chars :], budget_chars)
