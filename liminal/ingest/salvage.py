"""A batch every backend can store, from one it refused.

A frame's raw bytes always store; what is derived from it may not: a lone surrogate (valid in a
JSON string escape, invalid in UTF-8) in a prompt or a method name, an integer past 64 bits in a
tool's raw output or a usage figure. One such value would make the whole batch fail at every retry,
so the worker would loop on it forever and index nothing after it. ``salvage`` is called only after a
write failed (the normal path pays nothing): every text is made UTF-8 (lone surrogates become
U+FFFD), every JSON value storable (big integers become their digits as a string, what is nested
past ``MAX_DEPTH`` levels a note that the raw frame has it), and each
record that had to change gets a ``problem`` message that says why, next to its frame.

``cut_record`` is the next step, for one record a store still refuses (``liminal.ingest.poison``):
every text longer than a store may hold in one record is cut (a thread whose cwd is 17 MB, a
message past SQLite's length limit), and a message's data entries past ``CUT_DATA_BYTES`` are
left out. What was cut is kept whole elsewhere: in the frames (a message, a thread's fields), in
the raw line (a session record); raw bytes are never cut, every backend stores them in parts.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import fields, is_dataclass, replace
from typing import Any

import orjson

from liminal.store.records import Batch, FrameRecord, MessageRecord, SessionRecord, ThreadUpdate

INT64 = (-(2**63), 2**63 - 1)
# Below orjson's nesting limit (254) with room for the record around the value.
MAX_DEPTH = 128
TOO_DEEP = "[liminal: nested too deep to store; the raw frame has it]"
# What a record cut to fit any store keeps (``cut_record``): a field that is an id, a name or a
# path; the searchable text of a message or a session line; each entry of a message's data.
CUT_FIELD_CHARS = 4096
CUT_TEXT_CHARS = 64 * 1024
CUT_DATA_BYTES = 64 * 1024


def problem_message(kind: str, record: FrameRecord | MessageRecord | ThreadUpdate | SessionRecord,
                    reason: str, **data: Any) -> MessageRecord:
    """The ``problem`` message saying what happened to ``record``, in its thread: a frame the
    store keeps raw but could not derive (``kind`` ``derive``) or derived from a cut copy
    (``large``), a record made storable,
    cut or set aside (``kind`` the record's: ``frame``, ``message``, ``thread``, ``session``).
    Its id is ``<record id>:<kind>:problem`` (a thread update's record id is
    ``<thread id>@<time>``): a message's id is its frame's, and each keeps its own problem."""
    thread_id: str | None
    backing_id: str | None
    if isinstance(record, ThreadUpdate):
        record_id, thread_id, when, backing_id = (f"{record.id}@{record.time:.6f}", record.id,
                                                  record.time, None)
    else:
        record_id, thread_id, backing_id = record.id, record.thread_id, record.backing_id
        when = time.time() if isinstance(record, SessionRecord) else record.time
    record_id = cut_name(clean_text(record_id))
    return MessageRecord(
        id=f"{record_id}:{kind}:problem", thread_id=cut_name(clean_text(thread_id or "")),
        turn_id=None, time=when, order=f"{when:017.6f}|{record_id}|{kind}:problem",
        kind="problem", text=clean_text(reason), data={"frame": record_id, **data},
        backing_id=None if backing_id is None else cut_name(clean_text(backing_id)))


def cut_name(value: str) -> str:
    """An id, name or path of at most ``CUT_FIELD_CHARS``: cut, with a digest of the whole so
    that two long ones that start alike stay apart (the same one is always cut alike)."""
    if len(value) <= CUT_FIELD_CHARS:
        return value
    whole = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{value[:CUT_FIELD_CHARS - 18]}~{whole}"


def cut_text(value: str, where: str) -> str:
    """A text of at most ``CUT_TEXT_CHARS`` (and a note): ``where`` says what holds the rest."""
    if len(value) <= CUT_TEXT_CHARS:
        return value
    return (value[:CUT_TEXT_CHARS] + f"\n[liminal: cut here to fit the store; "
            f"{len(value) - CUT_TEXT_CHARS:,} more characters are in {where}]")


def _json_size(value: Any) -> int:
    try:
        return len(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        return len(str(value))


def cut_record(record: Any, where: str) -> tuple[Any, list[str]]:
    """The record with every field no store may refuse for its length, and the names of the
    fields cut: texts (``text``) to ``CUT_TEXT_CHARS``, other strings (ids, names, paths, each
    of a tuple) to ``CUT_FIELD_CHARS``, data entries (a message's ``data``, a session line's
    ``usage``) past ``CUT_DATA_BYTES`` left out. Raw bytes are kept whole."""
    assert is_dataclass(record) and not isinstance(record, type)
    changed: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if isinstance(value, str):
            short = cut_text(value, where) if f.name == "text" else cut_name(value)
            if short != value:
                changed[f.name] = short
        elif isinstance(value, tuple) and any(isinstance(v, str) and len(v) > CUT_FIELD_CHARS
                                              for v in value):
            changed[f.name] = tuple(cut_name(v) if isinstance(v, str) else v for v in value)
        elif isinstance(value, dict) and _json_size(value) > CUT_DATA_BYTES:
            if f.name == "data":
                kept = {k: v for k, v in value.items() if _json_size(v) <= CUT_DATA_BYTES}
                changed[f.name] = {**kept, "liminal_cut": sorted(set(value) - set(kept))}
            else:
                changed[f.name] = None
    if isinstance(record, SessionRecord) and _json_size(list(record.tool_ids)) > CUT_DATA_BYTES:
        changed["tool_ids"] = tuple(changed.get("tool_ids", record.tool_ids)[:64])
    return (replace(record, **changed) if changed else record), sorted(changed)


def clean_text(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)


def clean_json(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if INT64[0] <= value <= INT64[1] else str(value)
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_DEPTH:
        # orjson writes no deeper than 254 levels, and walking further here would reach
        # Python's recursion limit: such a value stayed unstorable, and its batch with it.
        return TOO_DEEP
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v, depth + 1) for v in value]
    return clean_text(str(value))


def _storable(value: Any) -> bool:
    try:
        if isinstance(value, str):
            value.encode("utf-8")
        elif isinstance(value, int) and not isinstance(value, bool):
            return INT64[0] <= value <= INT64[1]
        elif isinstance(value, (dict, list, tuple)):
            orjson.dumps(value)
        return True
    except (UnicodeEncodeError, TypeError, orjson.JSONEncodeError):
        return False


def _clean_record(record: Any) -> tuple[Any, list[str]]:
    """The record with every field storable, and the names of the fields that had to change."""
    assert is_dataclass(record) and not isinstance(record, type)
    changed: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if isinstance(value, (bytes, float, bool)) or value is None or _storable(value):
            continue
        changed[f.name] = clean_json(value) if not isinstance(value, str) else clean_text(value)
        if isinstance(value, tuple):
            changed[f.name] = tuple(changed[f.name])
    return (replace(record, **changed) if changed else record), sorted(changed)


def salvage(batch: Batch) -> tuple[Batch, int]:
    """A copy of ``batch`` that every backend can store, and how many records had to change."""
    frames: list[FrameRecord] = []
    problems: list[MessageRecord] = []
    for frame in batch.frames:
        clean_frame, changed = _clean_record(frame)
        frames.append(clean_frame)
        if changed:
            problems.append(problem_message("frame", frame,
                                            f"stored with {', '.join(changed)} made storable"))
    messages: list[MessageRecord] = []
    for message in batch.messages:
        clean_message, changed = _clean_record(message)
        messages.append(clean_message)
        if changed:
            problems.append(problem_message(
                "message", message,
                f"{message.kind} message stored with {', '.join(changed)} made storable"))
    threads = [_clean_record(r) for r in batch.threads]
    records = [_clean_record(r) for r in batch.session_records]
    # A session line or thread that had to change counts too (no problem message: a session
    # record keeps its raw line): uncounted, a batch of session lines would never be retried made
    # storable, and the file's indexing would stop at that line for good.
    remade = sum(1 for _, names in (*threads, *records) if names)
    return (Batch(frames, [*messages, *problems], [t for t, _ in threads], [r for r, _ in records]),
            len(problems) + remade)
