"""The gradient on a Gemini CLI session: a compressed copy under a new id that the CLI resumes.

The copy is written from the messages as the CLI resumes them (``ChatFile.messages``), not from
the file's lines: a header naming the new id, then one line per message kept. By turn (a turn
begins at a prompt of the person's), youngest first, the bands of ``liminal.gradient.bands``:
recent turns whole; middle turns with long call results and arguments cut to a head and a
recall key (``<original id>:<call id>:0`` the result, ``:1`` the arguments) and no thoughts;
old turns the prompts and the model's text only; the ancient ones summarised, the summary a
second part of the CLI's ``<session_context>`` message (the first content the model is sent),
so no message is invented for it.

Three things Gemini CLI 0.61.0 needs of the copy (docs/facts.md): the ``user`` records of
function responses are left out (each is in its call's ``result``; a resume sends both
otherwise); the file is named for a minute no load happens in (the minute before it is written:
a load in the minute a session began spoils its file); and the usage (``tokens``) is left out,
with the records holding nothing else, so that the copy's context is not read as the
original's until the CLI records its own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from liminal.config import GradientSettings
from liminal.gradient.bands import (
    Band,
    Cutter,
    TurnCost,
    assign_bands,
    preamble_budget,
)
from liminal.gradient.recall import RecallKey
from liminal.gradient.summarize import (
    PREAMBLE_INTRO,
    ExtractiveSummarizer,
    Summarizer,
    TurnDigest,
    scratchpad_chars,
    split_scratchpad,
    with_scratchpad,
)
from liminal.harness.gemini import records
from liminal.harness.gemini.chatfile import (
    ChatFile,
    context_size,
    is_function_responses,
    text_of,
    tool_calls,
)

Message = dict[str, Any]


def cost(n_bytes: int) -> int:
    return n_bytes // 4 + 1


def message_tokens(message: Mapping[str, Any]) -> int:
    """What the model is sent of a message, about: its content, its calls' names, arguments and
    results, its thoughts (not the ids, times and display fields the file keeps beside)."""
    calls = [(c.get("name"), c.get("args"), c.get("result")) for c in tool_calls(message)]
    return cost(len(orjson.dumps([message.get("content"), calls, message.get("thoughts") or []],
                                 option=orjson.OPT_NON_STR_KEYS, default=str)))


@dataclass(frozen=True, slots=True)
class Session:
    """A session's messages as the CLI resumes them: the head before the first prompt (the
    CLI's context, a summary of older turns in it), then the turns."""

    session_id: str
    metadata: dict[str, Any]
    head: tuple[Message, ...]
    turns: tuple[tuple[Message, ...], ...]
    context: int | None  # the last model message's usage: the context the model last read

    @classmethod
    def read(cls, path: Path) -> Session:
        chat = ChatFile.read(path)
        messages = chat.messages()
        head: list[Message] = []
        turns: list[list[Message]] = []
        for message in messages:
            if is_function_responses(message):  # sent twice if kept (docs/facts.md)
                continue
            if records.message_type(message) == "gemini:user":
                turns.append([message])
            elif turns:
                turns[-1].append(message)
            else:
                head.append(message)
        meta = chat.metadata()
        return cls(str(meta.get("sessionId") or ""), meta, tuple(head),
                   tuple(tuple(t) for t in turns), context_size(messages))


def previous_summary(head: Sequence[Message]) -> str | None:
    """The summary an earlier rewrite put in the context message (after ``PREAMBLE_INTRO``)."""
    for message in head:
        content = message.get("content")
        for part in content if isinstance(content, list) else ():
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and text.startswith(PREAMBLE_INTRO):
                return text.removeprefix(PREAMBLE_INTRO)
    return None


def _digest(number: int, turn: Sequence[Mapping[str, Any]]) -> TurnDigest:
    replies: list[str] = []
    tools: list[tuple[str, str]] = []
    for message in turn[1:]:
        if message.get("type") != "gemini":
            continue
        text = text_of(message.get("content"))
        if text:
            replies.append(text[:600])
        for call in tool_calls(message):
            args = call.get("args")
            detail = next((args[k] for k in ("file_path", "dir_path", "command", "pattern", "path")
                           if isinstance(args.get(k), str)), "") if isinstance(args, dict) else ""
            tools.append((str(call.get("name") or ""), detail))
    return TurnDigest(number, text_of(turn[0].get("content")), tuple(replies), tuple(tools))


def digests(turns: Sequence[Sequence[Mapping[str, Any]]]) -> list[TurnDigest]:
    return [_digest(n + 1, turn) for n, turn in enumerate(turns)]


class Edits:
    """What a band does to one message; returns the new message, or None to drop it."""

    def __init__(self, session_id: str, settings: GradientSettings) -> None:
        self.cutter = Cutter(session_id, settings)

    @staticmethod
    def recent(message: Message) -> Message | None:
        return message

    def middle(self, message: Message) -> Message | None:
        if message.get("type") != "gemini":
            return message
        calls = tool_calls(message)
        if not calls and not text_of(message.get("content")):
            return None  # thoughts alone
        out = {k: v for k, v in message.items() if k != "thoughts"}
        if calls:
            out["toolCalls"] = [self._call(call) for call in calls]
        return out

    def _call(self, call: dict[str, Any]) -> dict[str, Any]:
        call_id = str(call.get("id") or "")
        out = dict(call)
        if isinstance(call.get("args"), dict):
            out["args"] = self.cutter.leaves(call["args"], call_id, records.CALL_BLOCK, ())
        result = call.get("result")
        responses = [p for p in result if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)] \
            if isinstance(result, list) else []
        if len(responses) == 1 and isinstance(result, list) and len(result) == 1:  # the shape a recall key's block 0 names
            response = responses[0]["functionResponse"].get("response")
            if isinstance(response, dict) and set(response) == {"output"} and isinstance(response["output"], str):
                cut = self.cutter.cut(response["output"], RecallKey(self.cutter.session_id, call_id,
                                                                    records.OUTPUT_BLOCK))
                new: Any = response if cut is None else {"output": cut}
            elif isinstance(response, dict):
                new = self.cutter.leaves(response, call_id, records.OUTPUT_BLOCK, ())
            else:
                new = response
            out["result"] = [{**responses[0], "functionResponse": {**responses[0]["functionResponse"],
                                                                    "response": new}}]
        return out

    @staticmethod
    def old(message: Message) -> Message | None:
        if message.get("type") == "user":
            return message
        text = text_of(message.get("content"))
        if message.get("type") != "gemini" or not text:
            return None
        return {k: v for k, v in message.items() if k not in ("thoughts", "toolCalls")} | {"content": text}

    def of(self, band: Band) -> Any:
        return {Band.RECENT: self.recent, Band.MIDDLE: self.middle, Band.OLD: self.old}[band]


def _turn_cost(turn: Sequence[Message], edits: Edits, band: Band) -> int:
    edit = edits.of(band)
    return sum(message_tokens(m) for m in (edit(dict(m)) for m in turn) if m is not None)


def preamble_tokens(target_tokens: int, overhead: int, settings: GradientSettings) -> int:
    if not target_tokens:
        return settings.summary_tokens
    return preamble_budget(target_tokens - overhead, settings)


def turn_bands(session: Session, target_tokens: int, overhead: int, settings: GradientSettings,
               edits: Edits, head_chars: int = 0) -> list[Band]:
    """The gradient's walk (``assign_bands``), each turn costed as each band edits it."""
    overhead += sum(message_tokens(m) for m in session.head)
    reserve = preamble_tokens(target_tokens, overhead, settings) + (cost(head_chars) if head_chars else 0)
    floor = not target_tokens
    costs = [TurnCost(partial(_turn_cost, turn, edits)) for turn in session.turns]
    return assign_bands(costs, budget=0 if floor else target_tokens - overhead,
                        recent=settings.recent_tokens, middle=settings.middle_tokens,
                        reserve=reserve, keep=settings.recent_tokens if floor else 0)


def overhead_of(session: Session) -> int:
    """What the model is sent besides the messages (system instruction, tools): the last usage
    less the messages' estimate; 0 when no usage is recorded."""
    estimate = sum(message_tokens(m) for m in session.head) + sum(
        message_tokens(m) for turn in session.turns for m in turn)
    return max(0, (session.context or estimate) - estimate)


def summary_text(turns: Sequence[Sequence[Message]], previous: str | None, settings: GradientSettings,
                 budget_tokens: int, summarizer: Summarizer | None, scratchpad: str | None) -> str:
    carried, earlier = split_scratchpad(previous) if previous is not None else (None, None)
    budget = max(400, budget_tokens * 4 - len(PREAMBLE_INTRO))
    text = (summarizer or ExtractiveSummarizer()).summarize(digests(turns), earlier or None, budget)
    return PREAMBLE_INTRO + with_scratchpad(text, carried if scratchpad is None else scratchpad)


def _with_summary(head: Sequence[Message], summary: str | None) -> list[Message]:
    """The head with ``summary`` as the context message's second part, in place of an earlier
    rewrite's (None: the head as it is)."""
    if summary is None:
        return list(head)
    out: list[Message] = []
    placed = False
    for message in head:
        content = message.get("content")
        if not placed and records.message_type(message) == "gemini:user:context" and isinstance(content, list):
            kept = [p for p in content if not (isinstance(p, dict) and isinstance(p.get("text"), str)
                                                and p["text"].startswith(PREAMBLE_INTRO))]
            message = {**message, "content": [*kept, {"text": summary}]}
            placed = True
        out.append(message)
    if not placed:
        raise ValueError("the session has no context message to hold a summary")
    return out


def _without_usage(message: Message) -> Message | None:
    """The message without its ``tokens``; None for a record of usage alone (a model round trip
    is first written as one), which the CLI does not send."""
    if message.get("type") == "gemini" and not tool_calls(message) and not text_of(message.get("content")) \
            and not message.get("thoughts"):
        return None
    return {k: v for k, v in message.items() if k != "tokens"}


@dataclass(frozen=True, slots=True)
class GeminiRewrite:
    lines: tuple[bytes, ...]
    tokens_before: int
    tokens_after: int
    bands: tuple[Band, ...]  # one per turn of the original, oldest first
    recall_keys: int


def rewrite(session: Session, target_tokens: int, new_id: str, settings: GradientSettings,
            summarizer: Summarizer | None = None, scratchpad: str | None = None) -> GeminiRewrite:
    overhead = overhead_of(session)
    estimate = sum(message_tokens(m) for m in session.head) + sum(
        message_tokens(m) for turn in session.turns for m in turn)
    before = session.context or overhead + estimate
    previous = previous_summary(session.head)
    head_chars = scratchpad_chars(scratchpad, previous if scratchpad is None else None)
    edits = Edits(session.session_id, settings)
    bands = turn_bands(session, target_tokens, overhead, settings, edits, head_chars)
    ancient = [t for t, b in zip(session.turns, bands, strict=True) if b is Band.ANCIENT]
    summary = None
    if ancient:
        budget = preamble_tokens(target_tokens, overhead, settings)
        summary = summary_text(ancient, previous, settings, budget, summarizer, scratchpad)
    elif scratchpad is not None and previous is not None:
        summary = PREAMBLE_INTRO + with_scratchpad(previous, scratchpad)
    kept: list[Message] = _with_summary(session.head, summary)
    for turn, band in zip(session.turns, bands, strict=True):
        if band is Band.ANCIENT:
            continue
        edit = edits.of(band)
        kept.extend(m for m in (edit(dict(message)) for message in turn) if m is not None)
    return finish(session, kept, new_id, before, overhead, tuple(bands), edits.cutter.keys)


def finish(session: Session, messages: Sequence[Message], new_id: str, before: int, overhead: int,
           bands: tuple[Band, ...] = (), keys: int = 0) -> GeminiRewrite:
    """The file: a header naming ``new_id`` (the original's metadata otherwise), then a line per
    message, usage-only records and ``tokens`` left out."""
    header = {k: v for k, v in session.metadata.items() if k not in ("messages",)}
    header["sessionId"] = new_id
    header.setdefault("kind", "main")
    out = [orjson.dumps(header)]
    sent = [m for m in (_without_usage(message) for message in messages) if m is not None]
    out.extend(orjson.dumps(message) for message in sent)
    after = overhead + sum(message_tokens(m) for m in sent)
    return GeminiRewrite(tuple(line + b"\n" for line in out), before, after, bands, keys)


def by_band(session: Session, plan: GeminiRewrite) -> dict[str, dict[str, int]]:
    """Each band's turns and what they weigh now, whole."""
    out: dict[str, dict[str, int]] = {b.value: {"turns": 0, "tokens": 0} for b in Band}
    for turn, band in zip(session.turns, plan.bands, strict=True):
        out[band.value]["turns"] += 1
        out[band.value]["tokens"] += sum(message_tokens(m) for m in turn)
    return out


def ancient_digests(session: Session, target_tokens: int, settings: GradientSettings) -> list[TurnDigest]:
    bands = turn_bands(session, target_tokens, overhead_of(session), settings, Edits(session.session_id, settings))
    return digests([t for t, b in zip(session.turns, bands, strict=True) if b is Band.ANCIENT])


def file_name(new_id: str, now: float | None = None) -> str:
    """``session-<minute>-<id8>.jsonl`` for the minute before ``now``: the CLI's name for a
    session, never the minute of a load that comes after it is written."""
    minute = time.strftime("%Y-%m-%dT%H-%M", time.gmtime((time.time() if now is None else now) - 60))
    return f"session-{minute}-{new_id[:8]}.jsonl"
