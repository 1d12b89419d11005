"""The dynamic zone's two ends in the kernel: what a move offers it beside the passages its
rewrite cuts (read from the store before the rewrite, which chooses among them all:
``liminal.gradient.zone``), and what ``/context`` says a move placed (the journal record's
``zone``).

What is offered (``ZoneSource.pool``, docs/memory.md):

- every memo;
- other conversations' lessons (``liminal.lookup.lessons``), the model's summaries of them and
  their titles: those of the same project folder (``memory.reach`` ``folder``), or of every
  conversation (``all``: another folder's weigh less), none with ``off``. A lesson of at most
  ``SHORT_LESSON`` characters is placed whole; a longer one, a summary and a title as a
  **tickle**: one line naming the conversation (its title and date), what it is about, and the
  key ``recall`` takes for the rest. A conversation is offered by its title alone only when it
  has no lesson or summary to offer. Recent ones weigh more (``recency``), and so does a lesson
  the person confirmed (``CONFIRMED``).

The model's review (``liminal.kernel.summaries``: the same side session as the summary, a turn or
two before the swap) keeps or drops the candidates the first stage would place then; what it
dropped is kept out of the swap that ends that cycle (``offer``), and the journal keeps each
drop with its reason. Without a review (summaries off, the side session refused or too late)
the first stage's choice stands.

Reading is beside the swap, never in its way: a store that is down or slow leaves the zone to
the passages alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from liminal import log
from liminal.config import MemorySettings
from liminal.gradient.zone import Candidate
from liminal.lookup import lessons
from liminal.lookup.memos import describe, find_memos
from liminal.store.records import SUMMARY_THREAD, Thread, summarised

if TYPE_CHECKING:
    from liminal.store.base import Store

logger = log.get("liminal.zone")

READ_SECONDS = 3.0  # a swap holds the thread's prompts: the candidates get this long
THREADS = 200  # the most recently active conversations whose memory is weighed
SUMMARIES_EACH = 10  # of each, its newest summaries by the model
SHORT_LESSON = 200  # a lesson this long at most is placed whole; longer, as a tickle
HALF_LIFE_DAYS = 14.0  # an item this old weighs 0.75, a very old one 0.5 (``recency``)
CONFIRMED = 1.5  # a lesson the person confirmed weighs this much more
ELSEWHERE = 0.7  # with ``memory.reach = "all"``: another folder's memory weighs this much
HEAD_CHARS = 120  # of a tickle's item, what says what it is about


def recency(age_seconds: float) -> float:
    """1 for what is new, 0.5 for what is very old, halfway at ``HALF_LIFE_DAYS``."""
    days = max(0.0, age_seconds) / 86_400
    return 0.5 + 0.5 * float(0.5 ** (days / HALF_LIFE_DAYS))


@dataclass(frozen=True, slots=True)
class Verdict:
    """The model's review of one candidate: keep or drop, and why (one line)."""

    key: str
    kind: str
    text: str  # as it would be placed
    keep: bool
    reason: str

    def as_dict(self) -> dict[str, object]:
        """As the journal keeps a drop beside what was placed (``SwapRecord.zone``)."""
        return {"key": self.key, "kind": self.kind, "score": 0.0, "text": self.text, "placed": False,
                "why": f"dropped by the model's review: {self.reason}"}


@dataclass(frozen=True, slots=True)
class Offer:
    """What a move offers its zone beside the passages, and what the review kept out."""

    candidates: tuple[Candidate, ...] = ()
    dropped: tuple[Verdict, ...] = ()


def _title(thread: Thread) -> str:
    return " ".join(thread.title.split())[:80] or thread.id[:8]


def _head(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= HEAD_CHARS else text[:HEAD_CHARS - 1].rstrip() + "…"


def tickle(thread: Thread, when: float, about: str, key: str) -> str:
    """The one line that reminds the model of another conversation."""
    return (f'reminds of the conversation "{_title(thread)}" ({lessons.when(when)}), about: {_head(about)} '
            f"(recall {key} for the rest)")


class ZoneSource:
    """The candidates a thread's moves offer their zones, and the model's verdicts on them."""

    def __init__(self, open_store: Callable[[], AbstractAsyncContextManager[Store]],
                 settings: MemorySettings | None = None, clock: Callable[[], float] = time.time) -> None:
        self._open_store = open_store
        self.settings = settings or MemorySettings()
        self.clock = clock
        # thread -> (the session its review was made on: one swap cycle, the verdicts by key)
        self._reviews: dict[str, tuple[str, dict[str, Verdict]]] = {}

    async def pool(self, thread: str, cwd: str | None) -> list[Candidate]:
        """Every candidate of the kernel's for ``thread``'s zone: memos, then other
        conversations' lessons, summaries and titles (``memory.reach``)."""
        async with self._open_store() as store:
            memos = await find_memos(store, [], "")
            found = [Candidate(m.id, "memo", describe(m), n) for n, m in enumerate(reversed(memos))]
            if self.settings.reach != "off":
                found += await self._others(store, thread, cwd, len(found))
        return found

    async def _others(self, store: Store, thread: str, cwd: str | None, order: int) -> list[Candidate]:
        now = self.clock()
        reach = self.settings.reach
        near: dict[str, tuple[Thread, float]] = {}  # thread -> (it, its folder's weight)
        for listed in await store.threads(limit=THREADS):
            other = listed.thread
            if other.id == thread:
                continue
            if cwd and other.cwd == cwd:
                near[other.id] = (other, 1.0)
            elif reach == "all":
                near[other.id] = (other, ELSEWHERE)
        if not near:
            return []
        found: list[Candidate] = []
        offered: set[str] = set()  # conversations with a lesson or summary offered
        for lesson in reversed(await lessons.every(store)):  # the newest first on ties
            parts = [p for p in lesson.parts if p.thread in near]
            if not parts:
                continue  # this thread's own, or of conversations out of reach
            part = max(parts, key=lambda p: (p.time, p.thread))
            other, folder = near[part.thread]
            weight = recency(now - lesson.time) * folder * (CONFIRMED if lesson.confirmed else 1.0)
            origin = tuple(dict.fromkeys(p.thread for p in parts))
            offered.update(origin)
            named = f'"{_title(other)}" ({lessons.when(part.time)})'
            if len(lesson.text) <= SHORT_LESSON:
                shown = f"{lesson.text} (from the conversation {named}"
                shown += "; confirmed by the user)" if lesson.confirmed else ")"
                found.append(Candidate(lesson.key, "lesson", f"{lesson.text} {_title(other)}",
                                       order + len(found), weight, shown, origin))
            else:
                found.append(Candidate(lesson.key, "tickle", f"{lesson.text} {_title(other)}", order + len(found),
                                       weight, tickle(other, part.time, lesson.text, lesson.key), origin))
        each: dict[str, int] = {}
        for message in reversed(await store.messages(SUMMARY_THREAD, "summary")):
            of = summarised(message.data)
            if of not in near or not message.text.strip() or each.get(of, 0) >= SUMMARIES_EACH:
                continue
            each[of] = each.get(of, 0) + 1
            other, folder = near[of]
            offered.add(of)
            found.append(Candidate(message.id, "tickle", f"{message.text} {_title(other)}", order + len(found),
                                   recency(now - message.time) * folder,
                                   tickle(other, message.time, message.text, message.id), (of,)))
        for other, folder in near.values():
            if other.id in offered or not other.title.strip():
                continue
            key = f"thread:{other.id}"
            found.append(Candidate(key, "tickle", other.title, order + len(found),
                                   recency(now - other.updated) * folder,
                                   f'reminds of the conversation "{_title(other)}" ({lessons.when(other.updated)}) '
                                   f"(recall {key} for how it went)", (other.id,)))
        return found

    # ------------------------------------------------------------ the model's review

    def reviewed(self, thread: str, backing: str, verdicts: Sequence[Verdict]) -> None:
        """The model's review of the candidates for the swap that ends ``thread``'s cycle on
        ``backing`` (a later cycle's replaces it)."""
        self._reviews[thread] = (backing, {v.key: v for v in verdicts})

    def verdicts(self, thread: str, backing: str) -> dict[str, Verdict]:
        """The review made in this cycle (none: the first stage's choice stands)."""
        made = self._reviews.get(thread)
        return dict(made[1]) if made is not None and made[0] == backing else {}

    async def offer(self, thread: str, cwd: str | None, backing: str | None) -> Offer:
        """The candidates for a move's zone, less what the cycle's review dropped; none when
        there is no store or it does not answer in ``READ_SECONDS``."""
        try:
            with anyio.fail_after(READ_SECONDS):
                pool = await self.pool(thread, cwd)
        except Exception as exc:
            logger.warning("memos and other conversations not read for the dynamic zone", thread=thread,
                           error=f"{type(exc).__name__}: {exc}")
            return Offer()
        verdicts = self.verdicts(thread, backing) if backing is not None else {}
        kept: list[Candidate] = []
        dropped: list[Verdict] = []
        for candidate in pool:
            verdict = verdicts.get(candidate.key)
            if verdict is not None and not verdict.keep:
                dropped.append(verdict)
                continue
            if verdict is not None:
                candidate = Candidate(candidate.key, candidate.kind, candidate.text, candidate.order,
                                      candidate.weight, candidate.shown, candidate.origin,
                                      f"the model's review kept it: {verdict.reason}")
            kept.append(candidate)
        return Offer(tuple(kept), tuple(dropped))


def described(zone: list[dict[str, Any]] | None) -> list[str]:
    """``/context``'s lines for what the last move placed in its zone, and why; and what the
    model's review kept out of it."""
    entries = [e for e in zone or [] if isinstance(e, dict)]  # a hand-edited journal: shown as it can be
    placed = [e for e in entries if e.get("placed", True) is not False]
    dropped = [e for e in entries if e.get("placed", True) is False]
    out = [f"Dynamic zone ({len(placed)} placed by the last move, best first; each shares words with "
           "the recent turns):" if placed else "Dynamic zone: nothing placed by the last move."]
    for entry in placed:
        out.append(f"  {entry.get('kind', '?')} {entry.get('key', '?')}: {_short(entry.get('text'))}")
        score = entry.get("score")
        why = [f"score {score:.2f}" if isinstance(score, (int, float)) else "",
               str(entry.get("why") or "not reviewed by the model")]
        out.append(f"    why: {'; '.join(w for w in why if w)}")
    if dropped:
        out.append(f"Kept out by the model's review ({len(dropped)}):")
        out.extend(f"  {e.get('kind', '?')} {e.get('key', '?')}: {_short(e.get('text'))}\n    why: "
                   f"{e.get('why', '')}" for e in dropped)
    return out


def _short(value: object) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= 80 else text[:79] + "…"
