"""Summarizers: what the ancient band becomes in the preamble.

The interface is one method over small digests of turns (no file access, no I/O), so an LLM
summarizer can sit behind it later. The default is extractive, offline and deterministic: the
same input always gives the same bytes, which keeps rewrites reproducible and testable. It keeps
what a resumed agent most needs and is cheapest to lose: every user request (verbatim while the
budget allows), the assistant's stated decisions, the files touched, the commands run, and where
the conversation was heading when the band ends.
"""

from __future__ import annotations

import hashlib
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


# ------------------------------------------------------------------ the scratchpad
#
# The thread's scratchpad (``liminal.lookup.scratchpad``) heads the preamble's text, before the
# state anchor: every rewrite writes it as the store has it then, and a rewrite or cut that keeps
# an earlier preamble (nothing new to consolidate) has it replaced there. Its heading says how
# many characters it holds, so the next rewrite takes it out exactly, whatever it says (a line
# of its own may look like a heading of ours).

SCRATCHPAD_HEADING = "### Scratchpad"
_SCRATCHPAD = re.compile(r"\A### Scratchpad \((\d+) characters\b[^\n]*\n")


def scratchpad_section(text: str) -> str:
    """The scratchpad as a preamble's first section (``text`` stripped, not empty)."""
    text = text.strip()
    return (f"{SCRATCHPAD_HEADING} ({len(text)} characters, kept by you and the user; liminal's "
            f"scratchpad tool reads and changes it)\n{text}")


def split_scratchpad(body: str) -> tuple[str | None, str]:
    """A preamble's text after ``PREAMBLE_INTRO`` as (its scratchpad, the rest), or (None, the
    text as it is): it starts with none."""
    found = _SCRATCHPAD.match(body)
    if found is None:
        return None, body
    length = int(found.group(1))
    text = body[found.end():found.end() + length]
    if len(text) != length:
        return None, body  # cut short: not one of ours
    return text, body[found.end() + length:].lstrip("\n")


def with_scratchpad(body: str, scratchpad: str | None) -> str:
    """``body`` (a preamble's text after ``PREAMBLE_INTRO``) headed by ``scratchpad`` in place of
    any it had; None: the one it had stays; empty: none."""
    carried, rest = split_scratchpad(body)
    text = (carried if scratchpad is None else scratchpad.strip()) or ""
    if not text:
        return rest
    rest = rest.lstrip("\n")  # as ``split_scratchpad`` gives it back: the same body again
    return scratchpad_section(text) + ("\n\n" + rest if rest else "")


def scratchpad_chars(scratchpad: str | None, previous: str | None) -> int:
    """What the scratchpad section of a rewrite whose earlier preamble's text was ``previous``
    takes (``with_scratchpad``'s rules): the room a target must leave it."""
    text = split_scratchpad(previous or "")[0] if scratchpad is None else scratchpad.strip()
    return len(scratchpad_section(text)) + 2 if text else 0


# ------------------------------------------------------------------ the model's summaries
#
# liminal has the oldest turns summarised by the agent's own model, once, ahead of the swap
# (``liminal.kernel.summaries``); the swap's preamble then holds those summaries and a state
# anchor, and the extractive summary only of what no summary covers. Everything here is pure:
# the side session, the store and the timing are the kernel's.

SUMMARY_REQUEST = "You are summarising part of an earlier coding session"
FOLD_REQUEST = "Fold these summaries into one"  # a fold's request says it (the fake models tell)
ANCHOR_REQUEST = "Write the state anchor again"  # /context rebuild's request says it
STATE_HEADING = "### STATE"
MODEL_HEADING = "### Summary of earlier turns (written by the model)"
NOTES_HEADING = "### Notes on earlier turns (extracted)"
SUMMARY_SHARE = 0.7  # of the preamble's budget, at most, for the model's summaries


def turn_key(turn: TurnDigest) -> str:
    """A turn's identity across rewrites: its prompt and the head of its first reply, which
    every band keeps (a number changes as turns are consolidated; tool calls are dropped from
    old turns)."""
    first = turn.replies[0][:200] if turn.replies else ""
    return hashlib.sha256(f"{turn.prompt.strip()}\x00{first.strip()}".encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """A range of turns summarised by the model: its turns' keys (oldest first), the summary,
    and the state anchor it gave (None: it gave none). A **fold** (``parts``: the
    ``text_hash`` of each summary it replaces, oldest first) is the model's coarser summary of
    older summaries, its ``keys`` theirs together. A state anchor alone (no keys, no text) is
    what ``/context rebuild`` wrote."""

    keys: tuple[str, ...]
    text: str
    anchor: str | None = None
    parts: tuple[str, ...] = ()


def rendered(text: str) -> str:
    """A summary as the preamble holds it: one paragraph (its blank lines closed up), since the
    preamble separates summaries by a blank line and the next swap reads them back by it."""
    lines = (_HEADING.sub("", line) for line in text.strip().splitlines() if line.strip())
    return "\n".join(lines)


_HEADING = re.compile(r"^#+\s+")  # the model's own headings: the preamble's ``### `` are its sections


def text_hash(text: str) -> str:
    """A summary's identity in a preamble (a fold names its parts by it)."""
    return hashlib.sha256(rendered(text).encode()).hexdigest()[:24]


def model_room(budget_chars: int) -> int:
    """The characters of a preamble of ``budget_chars`` the model's summaries may take."""
    return int(budget_chars * SUMMARY_SHARE)


def live(summaries: Sequence[ModelSummary]) -> list[ModelSummary]:
    """The thread's summaries as its preamble holds them once their turns are consolidated,
    oldest first: every fold in place of its parts, no anchor-only record."""
    by_hash = {text_hash(s.text): s for s in summaries if s.text}
    ranges = [rendered(s.text) for s in summaries if s.keys and s.text and not s.parts]
    return [by_hash[text_hash(t)] for t in fold_texts(ranges, [s for s in summaries if s.parts])]


def fold_texts(texts: list[str], folds: Sequence[ModelSummary]) -> list[str]:
    """``texts`` (summaries as a preamble holds them, oldest first) with each fold where its
    first part was and none of its parts: the folds in the order they were made, since a later
    fold may hold an earlier one. A part not there (its turns not consolidated yet, or given
    way) is replaced when it comes: it is never there beside its fold."""
    for fold in folds:
        parts = set(fold.parts)
        at = [i for i, t in enumerate(texts) if text_hash(t) in parts]
        if not at or not fold.text:
            continue
        kept = [t for i, t in enumerate(texts) if i not in set(at)]
        if rendered(fold.text) not in kept:
            kept.insert(at[0], rendered(fold.text))
        texts = kept
    return texts


FOLD_AT = 0.8  # of the summaries' room: past it the oldest are folded, before any has to give way
FOLD_SHARE = 0.25  # of the room, at most, for a fold's text


def plan_fold(summaries: Sequence[ModelSummary], budget_chars: int) -> list[ModelSummary]:
    """The oldest summaries to fold into one (none: no fold is needed). Once the preamble's
    summaries pass ``FOLD_AT`` of their room, the oldest, two or more, never the newest (it
    says where the work stands), until what stays with the fold is at most half the room."""
    now = live(summaries)
    room = model_room(budget_chars)
    sizes = [len(rendered(s.text)) + 2 for s in now]
    if len(now) < 3 or sum(sizes) <= FOLD_AT * room:
        return []
    parts: list[ModelSummary] = []
    left = sum(sizes)
    for summary, size in zip(now[:-1], sizes[:-1], strict=True):
        parts.append(summary)
        left -= size
        if len(parts) >= 2 and left + fold_chars(budget_chars) <= room // 2:
            break
    return parts if len(parts) >= 2 else []


def fold_chars(budget_chars: int) -> int:
    """At most this long, a fold's text."""
    return int(model_room(budget_chars) * FOLD_SHARE)


def fold_request(parts: Sequence[ModelSummary], limit_chars: int) -> str:
    """The prompt of a side session that folds ``parts`` (oldest first) into one."""
    out = [
        f"{SUMMARY_REQUEST} for the assistant that will continue it. Do not use any tools: "
        "answer from the text below only.",
        "",
        f"{FOLD_REQUEST}: the {len(parts)} summaries below cover consecutive earlier parts of "
        f"the session, oldest first. Write one summary of all of them, at most {limit_chars} "
        "characters, under exactly this heading:",
        "## SUMMARY",
        "The goal; decisions and why; findings; what was tried and failed; open questions; "
        "technical anchors (paths, names, ports, ids, commands) still in use. Where a later part "
        "changed an earlier one, keep the later.",
        "",
        "The summaries:",
    ]
    for n, part in enumerate(parts, 1):
        out.append(f"--- part {n}")
        out.append(part.text.strip())
    return "\n".join(out)


def anchor_request(turns: Sequence[TurnDigest], summaries: Sequence[ModelSummary], anchor: str | None) -> str:
    """The prompt of ``/context rebuild``'s side session: the thread's context now (the model's
    summaries of what was consolidated, the last anchor, the turns) and a new ``## STATE``."""
    out = [
        f"{SUMMARY_REQUEST} for the assistant that will continue it. Do not use any tools: "
        "answer from the text below only.",
        "",
        f"{ANCHOR_REQUEST}: write where the work stands now, under exactly this heading:",
        "## STATE",
        "Goal: ...; Editing: (files or parts being changed); Resolved: ...; "
        "Anchors: (paths, names, ports, ids, commands). At most 8 lines.",
        "",
    ]
    if summaries:
        out.append("Summaries of the earliest turns:")
        out.extend(f"--- summary {n}\n{s.text.strip()}" for n, s in enumerate(summaries, 1))
        out.append("")
    if anchor:
        out += ["The state as last written (it may be out of date):", anchor.strip(), ""]
    out.append("The turns:")
    out.extend(_turn_lines(turns))
    return "\n".join(out)


LESSONS_MAX = 6  # lessons a range gives at most
SUMMARY_WORDS = 200  # the summary's words at most, with lessons asked beside it
LESSON_ASKED_CHARS = 160  # what a lesson is asked to stay under
NOTE_CHARS = 200  # of a note to review, what the request gives (its key gets the rest)
LESSON_CHARS = 300  # a lesson's text at most, as kept
REASON_CHARS = 160  # a review's reason at most, as kept


def summary_request(turns: Sequence[TurnDigest], *, lessons: bool = False,
                    review: Sequence[tuple[str, str]] = ()) -> str:
    """The one prompt of a side session: the turns as text and what to write of them; with
    ``lessons``, the range's lessons too (``## LESSONS``); with ``review`` (key, text), a keep or
    drop of each note the next swap's dynamic zone may place (``## REVIEW``): the same request,
    so the same side session and the same one prompt of the CLI's own."""
    sections = ["two sections", "three sections", "four sections"][int(lessons) + int(bool(review))]
    out = [
        f"{SUMMARY_REQUEST} for the assistant that will continue it. Do not use any tools: "
        "answer from the text below only.",
        "",
        f"Write {sections}, exactly these headings:",
        "## STATE",
        "Goal: ...; Editing: (files or parts being changed); Resolved: ...; "
        "Anchors: (paths, names, ports, ids, commands). At most 8 lines.",
        "## SUMMARY",
        "The goal; decisions and why; findings; what was tried and failed; open questions; "
        "technical anchors (paths, names, ports, ids, commands). Be concrete and brief"
        + (f": at most {SUMMARY_WORDS} words." if lessons else "."),
    ]
    if lessons:
        out += [
            "## LESSONS",
            "What a later conversation in this project should know from these turns: decisions, "
            "facts the user asked to keep, conventions, open threads of work. One a line, at most "
            f"{LESSONS_MAX}, each under {LESSON_ASKED_CHARS} characters and whole in itself, as "
            "`- (turn N, decision|fact|convention|open) the lesson`; nothing worth keeping: `- none`.",
        ]
    if review:
        out += [
            "## REVIEW",
            "liminal may put the notes listed at the end, from other conversations and saved "
            "memos, into the assistant's context at the next compaction. For each, one line: "
            "`- KEY keep: why` or `- KEY drop: why`, in at most ten words. Keep only what bears on "
            "the work in these turns.",
        ]
    out += ["", "The turns:", *_turn_lines(turns)]
    if review:
        out += ["", "The notes to review:", *(f"- {key}: {_clip(' '.join(text.split()), NOTE_CHARS)}"
                                              for key, text in review)]
    return "\n".join(out)


def _turn_lines(turns: Sequence[TurnDigest]) -> list[str]:
    out: list[str] = []
    for turn in turns:
        out.append(f"--- turn {turn.number}")
        out.append("User: " + turn.prompt.strip())
        out.extend("Assistant: " + reply.strip() for reply in turn.replies if reply.strip())
        out.extend(f"Tool {name}: {detail}" for name, detail in turn.tools if detail)
    return out


_AFTER_SUMMARY = re.compile(r"^#+\s*(LESSONS|REVIEW)\s*$", re.MULTILINE)


def parse_answer(answer: str) -> tuple[str, str | None]:
    """The model's answer as (summary, state anchor): the sections ``summary_request`` asked
    for, or the whole answer as the summary when it did not write them. The lessons and the
    review after them are no part of either."""
    text = answer.strip()
    later = _AFTER_SUMMARY.search(text)
    if later is not None:
        text = text[:later.start()].strip()
    state = re.search(r"^#+\s*STATE\s*$", text, re.MULTILINE)
    summary = re.search(r"^#+\s*SUMMARY\s*$", text, re.MULTILINE)
    if state is None or summary is None or summary.start() < state.end():
        return text, None
    anchor = text[state.end():summary.start()].strip()
    return text[summary.end():].strip(), anchor or None


@dataclass(frozen=True, slots=True)
class DrawnLesson:
    """A lesson as the model wrote it under ``## LESSONS``: its text, what it is, the turn it
    cited (the number ``summary_request`` gave it; None: none or not one of the range's)."""

    text: str
    sort: str = "fact"
    turn: int | None = None


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(?P<rest>.+)$")
# ``(turn 3, decision)`` ahead of a lesson: either part may be missing, not both.
_CITED = re.compile(r"^[(\[]\s*(?:turns?\s*(?P<turn>\d+))?\s*[,;]?\s*"
                    r"(?P<sort>decision|fact|convention|open)?\s*[)\]]\s*[:.-]?\s*", re.IGNORECASE)


def parse_lessons(answer: str, turns: Sequence[TurnDigest] = ()) -> list[DrawnLesson]:
    """The lessons of a model's answer (its ``## LESSONS`` section, one a list item), at most
    ``LESSONS_MAX``; none when it wrote no such section or ``- none``."""
    body = section(answer, "LESSONS")
    if not body:
        return []
    numbers = {t.number for t in turns}
    found: list[DrawnLesson] = []
    for line in body.splitlines():
        bullet = _BULLET.match(line)
        if bullet is None:
            continue
        text = bullet.group("rest").strip().strip("`").strip()
        cited = _CITED.match(text)
        turn, sort = None, "fact"
        if cited is not None and (cited.group("turn") or cited.group("sort")):
            text = text[cited.end():]
            turn = int(cited.group("turn")) if cited.group("turn") else None
            sort = (cited.group("sort") or "fact").lower()
        text = " ".join(text.split())
        if not text or text.lower().rstrip(".") in ("none", "nothing", "n/a"):
            continue
        found.append(DrawnLesson(_clip(text, LESSON_CHARS), sort,
                                 turn if turn in numbers or not numbers else None))
        if len(found) >= LESSONS_MAX:
            break
    return found


def parse_review(answer: str, keys: Sequence[str]) -> dict[str, tuple[bool, str]]:
    """The model's keep or drop of each of ``keys`` (its ``## REVIEW`` section), with its reason
    (at most ``REASON_CHARS``); a key it said nothing of is not in it."""
    body = section(answer, "REVIEW")
    if not body:
        return {}
    verdicts: dict[str, tuple[bool, str]] = {}
    for line in body.splitlines():
        for key in keys:
            at = line.find(key)
            if at < 0 or key in verdicts:
                continue
            rest = line[at + len(key):]
            said = re.match(r"[\s`*:—-]*(keep|drop)\b[\s`*:—-]*(.*)$", rest, re.IGNORECASE)
            if said is None:
                continue
            reason = _clip(" ".join(said.group(2).split()), REASON_CHARS) or said.group(1).lower()
            verdicts[key] = (said.group(1).lower() == "keep", reason)
    return verdicts


_LEFT_OUT = "({} earlier summaries left out; search the history)"
_LEFT_OUT_LINE = re.compile(r"^\(\d+ earlier summaries left out; search the history\)$")


def section(answer: str, name: str) -> str | None:
    """The ``## NAME`` section of a model's answer (up to its next heading of ours: ``STATE``,
    ``SUMMARY``, ``LESSONS``, ``REVIEW``), or None: it wrote none."""
    found = re.search(rf"^#+\s*{name}\s*$", answer, re.MULTILINE)
    if found is None:
        return None
    after = answer[found.end():]
    end = re.search(r"^#+\s*(STATE|SUMMARY|LESSONS|REVIEW)\s*$", after, re.MULTILINE)
    return (after[:end.start()] if end else after).strip() or None


def _split_ours(previous: str) -> tuple[list[str], str]:
    """A carried preamble of ours: the model's summaries it held, and the rest (the extractive
    part, or any text) for the extractive summarizer. Its state anchor is not carried: the
    newest one is written again at the top."""
    if MODEL_HEADING not in previous and NOTES_HEADING not in previous and STATE_HEADING not in previous:
        return [], previous
    model: list[str] = []
    rest = ""
    sections = re.split(r"^(### .*)$", previous, flags=re.MULTILINE)
    for heading, body in zip(sections[1::2], sections[2::2], strict=False):
        if heading == MODEL_HEADING:
            model.extend(p.strip() for p in body.strip().split("\n\n")
                         if p.strip() and not _LEFT_OUT_LINE.match(p.strip()))
        elif heading == NOTES_HEADING:
            rest = body.strip()
    return model, rest


@dataclass(frozen=True, slots=True)
class WithSummaries:
    """The preamble with the model's summaries: a state anchor at the top (the newest
    summary's), then every model summary the thread's preamble holds (those carried from the
    last preamble, and those whose whole range is now consolidated), then the extractive
    summary of the turns no summary covers. Falls back to the extractive preamble, byte for
    byte, when it has nothing of the model's to add."""

    summaries: tuple[ModelSummary, ...]  # the thread's, oldest first
    anchor: str | None = None
    base: ExtractiveSummarizer = ExtractiveSummarizer()

    def used(self, turns: Sequence[TurnDigest]) -> list[ModelSummary]:
        """The summaries whose every turn is among ``turns``."""
        keys = {turn_key(t) for t in turns}
        return [s for s in self.summaries if s.keys and s.text and not s.parts and set(s.keys) <= keys]

    def summarize(self, turns: Sequence[TurnDigest], previous: str | None, budget_chars: int) -> str:
        carried, rest_previous = _split_ours(previous or "")
        used = self.used(turns)
        if not used and not carried and self.anchor is None:
            return self.base.summarize(turns, previous, budget_chars)
        covered = {k for s in used for k in s.keys}
        # The person's requests stay, verbatim while the budget allows, for every turn: a
        # model's summary is where intent and corrections get lost (what people report of the
        # CLIs' own compaction). Only what the model's summary says instead (replies, tools)
        # is left out of the notes for the turns it covers.
        rest = [t if turn_key(t) not in covered else TurnDigest(t.number, t.prompt) for t in turns]
        texts = carried + [rendered(s.text) for s in used if rendered(s.text) not in carried]
        # The model's coarser summaries of older ones (``plan_fold``) in place of their parts.
        texts = fold_texts(texts, [s for s in self.summaries if s.parts])
        head: list[str] = []
        if self.anchor:
            head += [STATE_HEADING, _clip(self.anchor, max(200, budget_chars // 8)), ""]
        room = model_room(budget_chars) - sum(len(h) + 1 for h in head) - len(MODEL_HEADING)
        # Over budget, the oldest summaries give way first (the newest say where the work
        # stands), until a fold of them is ready.
        kept: list[str] = []
        for text in reversed(texts):
            if sum(len(t) + 2 for t in kept) + len(text) + 2 > room:
                break
            kept.insert(0, text)
        if len(kept) < len(texts):
            kept.insert(0, _LEFT_OUT.format(len(texts) - len(kept)))
        model = [MODEL_HEADING, "\n\n".join(kept), ""] if kept else []
        start = "\n".join(head + model)
        left = max(400, budget_chars - len(start) - len(NOTES_HEADING) - 1)
        notes = self.base.summarize(rest, rest_previous or None, left) if (rest or rest_previous) else ""
        return (start + f"{NOTES_HEADING}\n{notes}") if notes else start.rstrip()
