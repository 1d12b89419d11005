"""A batch the store refuses: what it can take is stored, the record it cannot is found, stored
cut or set aside, and nothing is written again into the same refusal.

Two kinds of failure look alike from the writer's side and must be told apart:

* **the store fails**: down, locked, full, slow, a timeout. Nothing is wrong with the records;
  the indexer waits (back-off) and writes the same batch again, for as long as it takes.
* **the store refuses a record**: a value it cannot encode, a document past 16 MB, a string past
  SQLite's length limit (``StoreRefused``: each backend tells the two apart). Written
  again, it fails again: a 1.5 GB answer would fail its batch at every retry, forever, and
  every frame after it with it.

For a refusal, ``write_batch`` first makes values storable (``salvage``: lone surrogates, huge
integers), then halves the batch until it has the records the store refuses alone (a few
writes: every record is idempotent, so those written twice are unchanged). Each of those is
stored cut (``salvage.cut_record``: its texts shortened, with a ``problem`` message saying what
was cut and what holds it whole); one refused even cut is set aside whole in
``$LIMINAL_HOME/quarantine`` (``liminal.ingest.quarantine``), named in a warning and in a
``problem`` message in its thread. Only then does the write count as done, and the spool that
held the batch can go.

A store that refuses even that small note refuses everything: it is failing, not the record, and
the batch is tried again later like any failure (so a broken store never empties the spool into
the quarantine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from liminal import log
from liminal.errors import in_words
from liminal.ingest.quarantine import set_aside
from liminal.ingest.salvage import cut_record, problem_message, salvage
from liminal.store.base import Store, StoreError, StoreRefused
from liminal.store.records import Batch

logger = log.get("liminal.ingest.poison")
_KINDS = ("frame", "message", "thread", "session")
# What holds a record whole once it was stored cut, by kind.
_WHOLE = {
    "frame": "its raw bytes are stored whole",
    "message": "its frames hold it whole",
    "thread": "the frames that said it hold it whole",
    "session": "the session file and the stored line hold it whole",
}


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` refuses what was written (writing it again fails again), rather than the
    store failing: the backend said so (``StoreRefused``)."""
    return isinstance(exc, StoreRefused)


async def write_batch(store: Store, batch: Batch, *, quarantine: Path) -> None:
    """Write ``batch``; records the store refuses are made storable, cut or set aside in
    ``quarantine`` (see the module). Raises only when the store fails."""
    try:
        await store.write(batch)
        return
    except Exception as exc:
        if not refused(exc):
            raise
        error = exc
    clean, flagged = salvage(batch)
    if flagged:
        try:
            await store.write(clean)
            logger.warning("indexer: records the store refused were stored made storable",
                           flagged=flagged, error=str(error)[:200])
            return
        except Exception as exc:
            if not refused(exc):
                raise
    logger.warning("indexer: the store refused a batch; finding the records it cannot take",
                   error=str(error)[:300])
    await _isolate(store, _records(clean), quarantine)


Item = tuple[str, Any]


def _records(batch: Batch) -> list[Item]:
    """The batch's records in its order (frames, messages, threads, session lines)."""
    return [*(("frame", r) for r in batch.frames), *(("message", r) for r in batch.messages),
            *(("thread", r) for r in batch.threads),
            *(("session", r) for r in batch.session_records)]


def _batch(items: list[Item]) -> Batch:
    kinds: dict[str, list[Any]] = {kind: [] for kind in _KINDS}
    for kind, record in items:
        kinds[kind].append(record)
    return Batch(kinds["frame"], kinds["message"], kinds["thread"], kinds["session"])


async def _isolate(store: Store, items: list[Item], quarantine: Path) -> None:
    """Every record of ``items`` (which the store refused together) written, or, alone and
    refused, cut or set aside. Halves, in order: thread updates merge in the order given."""
    if len(items) == 1:
        await _alone(store, *items[0], quarantine)
        return
    middle = len(items) // 2
    for part in (items[:middle], items[middle:]):
        try:
            await store.write(_batch(part))
        except Exception as exc:
            if not refused(exc):
                raise
            await _isolate(store, part, quarantine)


def _name(record: Any) -> str:
    return str(getattr(record, "id", ""))[:200]


async def _alone(store: Store, kind: str, record: Any, quarantine: Path) -> None:
    """One record the store refused: stored cut, or set aside whole."""
    cut, names = cut_record(record, "its frames" if kind == "message" else "the raw record")
    if names:
        note = problem_message(kind, record, f"{kind} stored cut to fit the store "
                                      f"({', '.join(names)}); {_WHOLE[kind]}")
        try:
            await store.write(_batch([(kind, cut), ("message", note)]))
            logger.warning("indexer: a record past what the store takes was stored cut",
                           kind=kind, record=_name(record), cut=names)
            return
        except Exception as exc:
            if not refused(exc):
                raise
            error: BaseException = exc
    else:
        error = StoreRefused("refused as it is, and there is nothing in it to cut")
    reason = f"the store refused it ({in_words(error)})"
    path = await anyio.to_thread.run_sync(set_aside, quarantine, kind, record, reason)
    note = problem_message(kind, record, f"{kind} set aside whole in {path}: {reason}", file=str(path))
    try:
        await store.write(Batch(messages=[note]))
    except Exception as exc:
        # Not even a small note: the store is failing, not this record. The whole batch is
        # tried again later (its file, if written, is written again over itself).
        raise StoreError(f"the store refuses even a note of a refused record: {exc}") from exc
    logger.warning("indexer: a record the store refuses was set aside", kind=kind,
                   record=_name(record), file=str(path), error=str(error)[:300])
