"""The gradient on a Gemini CLI session: a compressed copy under a new id that the CLI resumes.

The copy is written from the messages as the CLI resumes them (``ChatFile.messages``), not from
the file's lines: a header naming the new id, then one line per message kept. By turn (a turn
begins at a prompt of the person's), youngest first, the bands of ``liminal.gradient.bands``:
recent turns whole; middle turns with long call results and arguments cut to a head and a
recall key (``<original id>:<call id>:0`` the result, ``:1`` the arguments) and no thoughts;
old turns the prompts and the model's text only; the ancient ones summarised, the summary a
``user`` message after the CLI's ``<session_context>`` (the CLI sends them, and the first prompt
kept, as the first content).

Three things Gemini CLI 0.61.0 needs of the copy (docs/facts.md): the ``user`` records of
function responses are left out (each is in its call's ``result``; a resume sends both
otherwise); the file is named for a minute no load happens in (the minute before it is written:
a load in the minute a session began spoils its file); and the usage (``tokens``) is left out,
with the records holding nothing else, so that the copy's context is not read as the
original's until the CLI records its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection, Mapping, Sequence
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
    already_cut,
    assign_bands,
    preamble_budget,
    recallable,
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
from liminal.gradient.zone import Candidate, Placed, block, select
from liminal.gradient.zone import tokens as zone_tokens
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
        return cls.of(ChatFile.read(path))

    @classmethod
    def of(cls, chat: ChatFile) -> Session:
        messages = as_written(chat)
        head: list[Message] = []
        turns: list[list[Message]] = []
        for message in messages:
            if is_function_responses(message):  # sent twice if kept (docs/facts.md)
                continue
            if records.message_type(message) == "gemini:user:zone":  # each rewrite chooses its own
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


def _split_id(message_id: str, call_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"liminal:gemini:{message_id}:{call_id}"))


def as_written(chat: ChatFile) -> list[Message]:
    """The messages in the order the conversation had them, each call in the turn that made it.

    The CLI's reader (``ChatFile.messages``) keeps the last version of a message in its first
    place; Gemini CLI 0.61.0 records a later turn's calls by appending its first calls message
    again, under the same id, with every call so far (docs/facts.md), so that reader puts every
    call of the session in the first turn that made one. Here a message appended again with
    calls it did not hold stays where it was with its own, and the new calls become a message
    of their own (a new id, made from the first of them) where the line is, unless nothing came
    after it (calls of one round trip recorded in two steps). ``$set`` and rewinds are the
    CLI's."""
    by_id: dict[str, Message] = {}
    owner: dict[str, str] = {}  # call id -> the key of the message that holds it
    for line in chat.lines:
        obj = line.obj
        if obj is None:
            continue
        kind = line.kind
        if kind == "rewind":
            ids = list(by_id)
            cut = ids.index(obj["$rewindTo"]) if obj["$rewindTo"] in by_id else 0
            for gone in ids[cut:]:
                del by_id[gone]
            owner = {c: k for c, k in owner.items() if k in by_id}
        elif kind == "update" and isinstance(obj["$set"].get("messages"), list):
            by_id = {m["id"]: m for m in obj["$set"]["messages"]
                     if isinstance(m, dict) and isinstance(m.get("id"), str)}
            owner = {str(c.get("id")): k for k, m in by_id.items() for c in tool_calls(m)}
        elif kind == "header" and isinstance(obj.get("messages"), list):
            by_id.update({m["id"]: m for m in obj["messages"]
                          if isinstance(m, dict) and isinstance(m.get("id"), str)})
        elif kind == "message":
            key = obj["id"]
            calls = tool_calls(obj)
            if key not in by_id or not calls:
                by_id[key] = obj
                owner.update({str(c.get("id")): key for c in calls})
                continue
            fresh = [c for c in calls if str(c.get("id")) not in owner]
            for call in calls:  # a call held already: its latest version, where it is
                held = owner.get(str(call.get("id")))
                if held is not None and held in by_id:
                    message = by_id[held]
                    by_id[held] = {**message, "toolCalls": [call if c.get("id") == call.get("id") else c
                                                            for c in tool_calls(message)]}
            if not fresh:
                continue
            if list(by_id)[-1] == key:
                by_id[key] = {**by_id[key], "toolCalls": [*tool_calls(by_id[key]), *fresh]}
                owner.update({str(c.get("id")): key for c in fresh})
            else:
                new_key = _split_id(key, str(fresh[0].get("id")))
                by_id[new_key] = {**obj, "id": new_key, "toolCalls": fresh, "thoughts": []}
                by_id[new_key].pop("tokens", None)
                owner.update({str(c.get("id")): new_key for c in fresh})
    return list(by_id.values())


def previous_summary(head: Sequence[Message]) -> str | None:
    """The summary an earlier rewrite put before the turns (after ``PREAMBLE_INTRO``)."""
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
    """The head with ``summary`` as a ``user`` message after the CLI's context, in place of an
    earlier rewrite's (None: the head as it is). Not a part of the context message: a resume
    writes the context afresh and sends that message's parts no more; the summary, a message of
    its own, is sent in the first content with the context and the first prompt kept."""
    if summary is None:
        return list(head)
    out = [m for m in head if records.message_type(m) != "gemini:user:summary"]
    at = next((n + 1 for n, m in enumerate(out) if records.message_type(m) == "gemini:user:context"), 0)
    stamp = next((m.get("timestamp") for m in out if isinstance(m.get("timestamp"), str)), "")
    message = {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"liminal:gemini:summary:{summary}")),
               "timestamp": stamp, "type": "user", "content": [{"text": summary}]}
    return [*out[:at], message, *out[at:]]


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
    zone: tuple[Placed, ...] = ()  # the dynamic zone's entries


def choose_zone(session: Session, bands: Sequence[Band], memos: Sequence[Candidate], room: int,
                max_passages: int = 300) -> list[Placed]:
    """The zone: ``memos`` and the call results of the turns not kept whole, matched against
    what the person and the model said in the recent band (``liminal.gradient.zone``)."""
    if room <= 0 or all(b is Band.RECENT for b in bands):
        return []
    said = [text_of(m.get("content")) for turn, band in zip(session.turns, bands, strict=True)
            if band is Band.RECENT for m in turn if records.message_type(m) in ("gemini:user", "gemini:model")]
    calls = [call for turn, band in zip(session.turns, bands, strict=True) if band is not Band.RECENT
             for m in turn for call in tool_calls(m)]
    passages: list[Candidate] = []
    for order, call in enumerate(reversed(calls[-max_passages:])):  # the nearest first on ties
        text = records.response_text(call.get("result"))
        call_id = str(call.get("id") or "")
        if not call_id or not text.strip() or already_cut(text):
            continue
        key = RecallKey(session.session_id, call_id, records.OUTPUT_BLOCK)
        if recallable(key):
            passages.append(Candidate(str(key), "passage", text, len(memos) + order))
    return select([*memos, *passages], "\n".join(said), room)


def _zone_message(zone: Sequence[Placed], like: Sequence[Message]) -> Message:
    """The zone as a ``user`` message of its own: the CLI sends it in one content with the
    recent band's first prompt, which follows it; liminal's readers take it for no prompt."""
    text = block(zone)
    stamp = next((m.get("timestamp") for m in like if isinstance(m.get("timestamp"), str)), "")
    return {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"liminal:gemini:zone:{text}")), "timestamp": stamp,
            "type": "user", "content": [{"text": text}]}


def _render(session: Session, target_tokens: int, overhead: int, settings: GradientSettings,
            summarizer: Summarizer | None, scratchpad: str | None) -> tuple[list[Band], list[Message], int | None, Edits]:
    """The bands under ``target_tokens``, the messages they give, and where the recent band
    begins among them."""
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
    recent_at: int | None = None
    for turn, band in zip(session.turns, bands, strict=True):
        if band is Band.ANCIENT:
            continue
        if band is Band.RECENT and recent_at is None:
            recent_at = len(kept)
        edit = edits.of(band)
        kept.extend(m for m in (edit(dict(message)) for message in turn) if m is not None)
    return bands, kept, recent_at, edits


def rewrite(session: Session, target_tokens: int, new_id: str, settings: GradientSettings,
            summarizer: Summarizer | None = None, scratchpad: str | None = None,
            memos: Sequence[Candidate] = ()) -> GeminiRewrite:
    overhead = overhead_of(session)
    estimate = sum(message_tokens(m) for m in session.head) + sum(
        message_tokens(m) for turn in session.turns for m in turn)
    before = session.context or overhead + estimate
    bands, kept, recent_at, edits = _render(session, target_tokens, overhead, settings, summarizer, scratchpad)
    zone = choose_zone(session, bands, memos, settings.zone_tokens)
    need = zone_tokens(block(zone))
    if zone and target_tokens:
        # Under a target the zone must fit too: the bands are made again with its room taken
        # off, and it is chosen again for them (as for Claude Code and Codex: docs/gradient.md).
        planned = overhead + sum(message_tokens(m) for m in kept)
        if planned + need > target_tokens:
            bands, kept, recent_at, edits = _render(session, max(1, target_tokens - need), overhead, settings,
                                                    summarizer, scratchpad)
            planned = overhead + sum(message_tokens(m) for m in kept)
            zone = choose_zone(session, bands, memos, min(settings.zone_tokens, target_tokens - planned))
    if zone and recent_at is not None:
        kept.insert(recent_at, _zone_message(zone, kept))
    else:
        zone = []
    return finish(session, kept, new_id, before, overhead, tuple(bands), edits.cutter.keys, tuple(zone))


def finish(session: Session, messages: Sequence[Message], new_id: str, before: int, overhead: int,
           bands: tuple[Band, ...] = (), keys: int = 0, zone: tuple[Placed, ...] = ()) -> GeminiRewrite:
    """The file: a header naming ``new_id`` (the original's metadata otherwise), then a line per
    message, usage-only records and ``tokens`` left out."""
    header = {k: v for k, v in session.metadata.items() if k not in ("messages",)}
    header["sessionId"] = new_id
    header.setdefault("kind", "main")
    out = [orjson.dumps(header)]
    sent = [m for m in (_without_usage(message) for message in messages) if m is not None]
    out.extend(orjson.dumps(message) for message in sent)
    after = overhead + sum(message_tokens(m) for m in sent)
    return GeminiRewrite(tuple(line + b"\n" for line in out), before, after, bands, keys, zone)


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


def unused_name(session_id: str, taken: Collection[str], now: float | None = None) -> str:
    """``file_name``, or the first minute before it that no name in ``taken`` has."""
    at = time.time() if now is None else now
    while (name := file_name(session_id, at)) in taken:
        at -= 60
    return name


def refreshed(head: Sequence[Message], scratchpad: str) -> list[Message]:
    """The head with ``scratchpad`` in place of the one its summary holds (none: as it is)."""
    previous = previous_summary(head)
    if previous is None:
        return list(head)
    return _with_summary(head, PREAMBLE_INTRO + with_scratchpad(previous, scratchpad))


def resumable(chat: ChatFile) -> bytes | None:
    """A ``$set`` of the messages that makes ``chat`` resume as the conversation was (each call
    in its turn, no user record of function responses), or None: it resumes so already."""
    resolved = chat.messages()
    wanted = [m for m in as_written(chat) if not is_function_responses(m)]
    if wanted == resolved:
        return None
    return orjson.dumps({"$set": {"messages": wanted}})
