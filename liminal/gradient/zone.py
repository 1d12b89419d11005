"""The dynamic zone: what a thread is likely to need again, placed by a swap between the
compressed history (preamble, cut bands) and the recent turns.

Pure: candidates in (memos, other conversations' lessons, summaries and titles, and the
passages the rewrite takes out of the context, each with the key that gets it back), the recent
turns' text, a token budget; the chosen entries and the block's text out. The ranking is BM25 over the candidates with the recent turns' words as
the query, computed here rather than by the store's full-text search so that the same session
and the same memos give the same zone on SQLite and MongoDB (their scores differ) and in a
rewrite run by hand (``liminal compress``, no store). Common conversational words are not
query words: std::slop removed its ranked retrieval because "continue" and "next" matched
everything; a candidate must share at least ``MIN_TERMS`` distinct words with the recent
turns. A candidate's ``weight`` multiplies its score (the kernel's: a recent conversation,
a lesson the person confirmed, weigh more: docs/memory.md); what is placed is its ``shown``
text when it has one (a tickle: one line naming the conversation and the key), else its text,
clipped. The harness writes the block in its CLI's form (docs/formats.md) and recognises its
own earlier zones by ``ZONE_INTRO``, which a later rewrite drops (the zone is chosen afresh
at each swap). docs/gradient.md, "The dynamic zone".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ZONE_INTRO = "[liminal: context from earlier in this thread and saved memos]"
_ZONE_HEAD = (
    ZONE_INTRO + "\nliminal placed these because their words match the recent turns; they were "
    "not written by the user now. A passage's key gets its full text from liminal's recall "
    "tool; a memo is a note saved earlier (memo_save, /memo), named by its id; a lesson or a "
    "tickle comes from another conversation, and recall with its key gives what was said there.\n"
)
# How liminal's answer to a recall of its memory (another conversation's lesson, summary or
# title: ``liminal.lookup.lessons.resolve``) begins. Such an answer in this thread's tool output is
# no passage to place again: its words are another conversation's, which may have been forgotten
# or deleted since (the zone places them only through their own keys, read afresh).
RECOLLECTION = "[liminal memory]"
MAX_ENTRIES = 5
MIN_TERMS = 2  # distinct query words a candidate must share: one common word is noise
ENTRY_CHARS = 600  # an entry's text is clipped to this, so a few fit the budget
_TOKEN = re.compile(r"[a-z0-9_]+")
_K1, _B = 1.2, 0.75

# English function words and the words of conversation itself ("continue", "next", "ok"),
# which match any passage and say nothing of what the thread is about.
_STOP = """
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each else even ever few
for from further had has have having he her here hers him his how i if in into is it its itself
just let lets like me more most my no nor not now of off on once only or other our ours out over
own same she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself
ok okay yes yeah yep no nope please thanks thank thx sure right fine good great cool nice
continue continuing go ahead next proceed keep going again more another try retry let's lets
do done did make made get got see look looks looking show tell said say says want need needs
think know use used using work works working thing things something anything stuff way well
still already now then just really actually maybe also one two first last new old
"""
STOPWORDS = frozenset(_STOP.split())


@dataclass(frozen=True, slots=True)
class Candidate:
    key: str  # a recall key, a memo's id, a lesson's key
    kind: str  # "memo", "passage", "lesson" or "tickle"
    text: str  # what is matched against the recent turns
    order: int = 0  # ties: lower first (a memo's age, a passage's place)
    weight: float = 1.0  # the score is multiplied by it (recency, a confirmed lesson)
    shown: str = ""  # what is placed instead of ``text`` (a tickle's line); "": ``text``, clipped
    origin: tuple[str, ...] = ()  # the other conversations it comes from (their thread ids)
    why: str = ""  # why it is offered, beside its words (the model's review kept it: its reason)


@dataclass(frozen=True, slots=True)
class Placed:
    key: str
    kind: str
    text: str  # as placed (clipped)
    score: float
    origin: tuple[str, ...] = ()
    why: str = ""

    def as_dict(self) -> dict[str, object]:
        found: dict[str, object] = {"key": self.key, "kind": self.kind, "score": self.score, "text": self.text}
        if self.origin:
            found["from"] = list(self.origin)
        if self.why:
            found["why"] = self.why
        return found


def terms(text: str) -> list[str]:
    """The words of ``text`` that can match: lower case, three characters or more, not a
    stopword, not a number alone."""
    return [w for w in _TOKEN.findall(text.lower())
            if len(w) >= 3 and w not in STOPWORDS and not w.isdigit()]


def is_recollection(text: str) -> bool:
    """A recall of liminal's memory (``RECOLLECTION``), maybe after what a CLI puts before a
    tool's output (Codex's timing)."""
    return RECOLLECTION in text[:400]


def tokens(text: str) -> int:
    return len(text) // 4 + 1


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ENTRY_CHARS else text[: ENTRY_CHARS - 1] + "…"


def _entry(placed: Placed) -> str:
    return f"- {placed.kind} {placed.key}: {placed.text}"


def select(candidates: Iterable[Candidate], recent: str, budget_tokens: int,
           max_entries: int = MAX_ENTRIES) -> list[Placed]:
    """The candidates that best match ``recent``, best first, within ``budget_tokens`` for the
    whole block: BM25 times each one's ``weight``; no passage that is a recall of liminal's
    memory (``is_recollection``), one tickle a conversation (its best). Deterministic: ties go to
    the lower ``order``, then the key."""
    query = set(terms(recent))
    pool = [c for c in candidates if not (c.kind == "passage" and is_recollection(c.text))]
    if budget_tokens <= 0 or not query or not pool:
        return []
    docs = [Counter(terms(c.text)) for c in pool]
    lengths = [sum(d.values()) for d in docs]
    average = (sum(lengths) / len(lengths)) or 1.0
    frequency = Counter(w for d in docs for w in d if w in query)
    n = len(pool)
    scored: list[tuple[float, int, str, int]] = []
    for i, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
        shared = [w for w in query if w in doc]
        if len(shared) < MIN_TERMS or pool[i].weight <= 0:
            continue
        score = 0.0
        for w in sorted(shared):  # summed in one order: the same float every run
            idf = math.log(1 + (n - frequency[w] + 0.5) / (frequency[w] + 0.5))
            tf = doc[w]
            score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / average))
        score = round(score * pool[i].weight, 9)
        if score > 0:  # (a weight too small to count is none)
            scored.append((-score, pool[i].order, pool[i].key, i))
    scored.sort()
    placed: list[Placed] = []
    used = tokens(_ZONE_HEAD)
    reminded: set[str] = set()  # conversations a tickle already reminds of: one each
    for negative, _, _, i in scored:
        if len(placed) >= max_entries:
            break
        one = pool[i]
        if one.kind == "tickle" and reminded.intersection(one.origin):
            continue
        entry = Placed(one.key, one.kind, _clip(one.shown or one.text), -negative, one.origin, one.why)
        cost = tokens(_entry(entry)) + 1
        if used + cost > budget_tokens:
            continue  # a shorter one further down may still fit
        placed.append(entry)
        used += cost
        if one.kind == "tickle":
            reminded.update(one.origin)
    return placed


def block(placed: Sequence[Placed]) -> str:
    """The zone's text, as the model reads it; "" when nothing was placed."""
    if not placed:
        return ""
    return _ZONE_HEAD + "\n".join(_entry(p) for p in placed)


def is_zone(text: str) -> bool:
    """A block of ours (``block``): a later rewrite drops it."""
    return text.lstrip().startswith(ZONE_INTRO)
