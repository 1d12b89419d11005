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


def _item(text: str) -> str:
    """A request as a list item: its further lines indented, so that a line of the request
    (``- x``, a blank one, one that ends the list) is never read back as something else."""
    return "- " + "\n  ".join(text.splitlines() or [""])


def _is_path(detail: str) -> bool:
    return "/" in detail or "." in detail.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class ExtractiveSummarizer:
    max_decisions: int = 40
    max_commands: int = 40
    max_files: int = 80

    def _facts(self, turns: Sequence[TurnDigest], share: float) -> list[str]:
        """Decisions, files, commands: the part that does not depend on the prompt budget."""
        out: list[str] = []
        decisions: list[str] = []  # the latest ones matter most: collected from the end
        for turn in reversed(turns):
            for reply in reversed(turn.replies):
                for sentence in reversed(_SENTENCE.split(reply)):
                    if _DECISION.search(sentence) and share > 0:
                        decisions.append(f"- {_clip(sentence, 240)}")
                if len(decisions) >= int(self.max_decisions * share):
                    break
            if len(decisions) >= int(self.max_decisions * share):
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
        if files and share > 0:
            out.append("Files touched: " + ", ".join(list(files)[: int(self.max_files * share)]))
        if commands and share > 0:
            out.append("Commands run:")
            out.extend(f"- `{c}`" for c in list(commands)[: int(self.max_commands * share)])
        return out

    def _sections(
        self,
        requests: Sequence[str],
        carried: str,
        last: TurnDigest | None,
        cap: int,
        facts: list[str],
        omitted: int = 0,
    ) -> str:
        out: list[str] = []
        if carried:
            out.append("Earlier summary (carried over):\n" + carried)
        if requests or omitted:
            out.append(f"What the user asked ({len(requests)} requests, in order):")
            if omitted:
                out.append(f"- ({omitted} earlier requests omitted; see the transcript)")
            out.extend(_item(_clip(r, cap)) for r in requests)
        out.extend(facts)
        if last is not None:
            where = last.replies[-1] if last.replies else ""
            out.append(
                f"Open thread at the end of this part: the user had asked: {_clip(last.prompt, cap)}"
                + (f" The assistant last said: {_clip(where, 200)}" if where else "")
            )
        return "\n".join(out)

    def summarize(self, turns: Sequence[TurnDigest], previous: str | None, budget_chars: int) -> str:
        carried_requests, omitted, carried = _split_previous(previous or "")
        requests = carried_requests + [t.prompt for t in turns if t.prompt.strip()]
        carried = _clip(carried, max(200, budget_chars // 4)) if carried else ""
        last = turns[-1] if turns else None
        # The user's requests matter most: facts shrink first, then the requests get clipped,
        # and only then do the oldest requests give way.
        text = ""
        for cap, share in ((1000, 1.0), (1000, 0.4), (1000, 0.1), (1000, 0.0), (400, 0.0),
                           (160, 0.0), (80, 0.0)):
            text = self._sections(requests, carried, last, cap, self._facts(turns, share), omitted)
            if len(text) <= budget_chars:
                return text
        kept = list(requests)
        while kept and len(text) > budget_chars:
            drop = max(1, (len(text) - budget_chars) // 60)
            kept = kept[drop:]
            text = self._sections(kept, carried, last, 80, [], omitted + len(requests) - len(kept))
        return text[:budget_chars]


_REQUESTS_HEADER = re.compile(r"^What the user asked \(\d+ requests, in order\):$")
_OMITTED = re.compile(r"^\((\d+) earlier requests omitted; see the transcript\)$")


def _split_previous(previous: str) -> tuple[list[str], int, str]:
    """A carried summary of ours gives back its requests and how many it had already omitted;
    anything else is kept as text."""
    lines = previous.strip().splitlines()
    for n, line in enumerate(lines):
        if _REQUESTS_HEADER.match(line):
            requests: list[str] = []
            omitted = 0
            end = n + 1
            while end < len(lines) and lines[end].startswith("- "):
                item = [lines[end][2:]]
                end += 1
                while end < len(lines) and lines[end].startswith("  "):
                    item.append(lines[end][2:])  # the request's further lines
                    end += 1
                note = _OMITTED.match(item[0]) if len(item) == 1 else None
                if note:
                    omitted += int(note.group(1))
                else:
                    requests.append("\n".join(item))
            before = "\n".join(lines[:n]).removeprefix("Earlier summary (carried over):").strip()
            return requests, omitted, before
    return [], 0, previous.strip()
