"""What every CLI's gradient shares: the bands and their budgets under a target, and cutting
text with a recall marker.

The bands and their budgets are described in docs/gradient.md; each CLI's gradient
(``liminal.harness.claude.gradient``, ``liminal.harness.codex.gradient``) applies them to its
own records. A cut keeps a head of the text and ends with a marker naming the recall key of the
original (``liminal.gradient.recall``); text already cut keeps its first key.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, overload

from liminal.config import PREAMBLE_MIN_TOKENS, GradientSettings
from liminal.gradient.recall import KEY_IN_MARKER, MARKER_PREFIX, RecallError, RecallKey, marker

MARKER_CHARS = 160  # the marker's own length, about


class Band(enum.Enum):
    RECENT = "recent"
    MIDDLE = "middle"
    OLD = "old"
    ANCIENT = "ancient"


def preamble_budget(room: int, settings: GradientSettings) -> int:
    """The preamble's share of ``room`` (the target less the CLI's own prompt): a quarter of a
    small room, never less than ``PREAMBLE_MIN_TOKENS``, at most ``summary_tokens``."""
    return min(settings.summary_tokens, max(PREAMBLE_MIN_TOKENS, room // 4))


def recent_budget(room: int, reserve: int, settings: GradientSettings, *, floor: bool) -> int:
    """What the recent band may hold (the gradient keeps at least the last turn whatever this
    says). Asked for the floor (a target of 0), ``recent_tokens`` whole: the floor is defined by
    it. Asked for a target, at most what fits under it once the preamble (``reserve``) has its
    room: a target is a promise, and a band kept whole past it would break it at every swap
    (a 20k band under a 12k target: no swap could ever land under the trigger)."""
    if floor:
        return settings.recent_tokens
    return max(0, min(settings.recent_tokens, room - reserve))


def assign_bands(
    costs: Sequence[Sequence[int]],
    *,
    budget: int,
    recent: int,
    middle: int,
    reserve: int,
    keep: int = 0,
) -> list[Band]:
    """Bands for turns given (full, truncated, prose) token costs, oldest first. The recent band
    gets ``keep`` tokens whatever the budget, and up to ``recent`` within it; the youngest turn
    is recent whatever either says. Then middle turns up to ``middle`` of what the budget leaves
    after the recent band and ``reserve`` (the preamble's), then old turns in the rest; the
    others are ancient (consolidated into the preamble). Each CLI's gradient costs its own
    turns (Claude Code's records, Codex's response items) and asks this for the bands."""
    bands = [Band.ANCIENT] * len(costs)
    used = 0
    i = len(costs) - 1
    # ``keep`` is the floor's (a rewrite asked for the floor keeps the configured band whole:
    # that is what the floor is); under a target the band is what fits (``recent_budget``).
    limit = max(keep, min(recent, budget - reserve))
    while i >= 0 and (i == len(costs) - 1 or used + costs[i][0] <= limit):
        bands[i] = Band.RECENT
        used += costs[i][0]
        i -= 1
    limit = used + min(middle, max(0, budget - reserve - used))
    while i >= 0 and used + costs[i][1] <= limit:
        bands[i] = Band.MIDDLE
        used += costs[i][1]
        i -= 1
    limit = budget - reserve
    while i >= 0 and used + costs[i][2] <= limit:
        bands[i] = Band.OLD
        used += costs[i][2]
        i -= 1
    return bands


class TurnCost(Sequence[int]):
    """One turn's token cost in the recent, middle and old bands (whole, cut, prose), each computed
    when first asked for: band assignment walks from the youngest turn and stops where the
    ancient band begins, and asks each turn only for the cost of the band it is trying."""

    __slots__ = ("_cost", "_values")

    def __init__(self, cost: Callable[[Band], int]) -> None:
        self._cost = cost
        self._values: list[int | None] = [None, None, None]

    def __len__(self) -> int:
        return 3

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(3))]
        value = self._values[index]
        if value is None:
            value = self._cost((Band.RECENT, Band.MIDDLE, Band.OLD)[index])
            self._values[index] = value
        return value


def already_cut(text: str) -> bool:
    return MARKER_PREFIX in text


def recallable(key: RecallKey) -> bool:
    """The key comes back whole from its marker. A record id or a path step with a ':' or a
    '.' (a provider's call id ``functions.exec_command:0``, a tool argument keyed by a file
    name) or a space or ']' would be read back as another key, or none: text cut under it could
    never be recalled, so it is left whole."""
    found = KEY_IN_MARKER.search(marker(0, key))
    if found is None or found.group(1) != str(key):
        return False
    try:
        return RecallKey.parse(found.group(1)) == key
    except RecallError:
        return False


class Cutter:
    def __init__(self, session_id: str, settings: GradientSettings) -> None:
        self.session_id = session_id
        self.chars = settings.truncate_chars
        self.lines = settings.truncate_lines
        self.keys = 0

    def cut(self, text: str, key: RecallKey) -> str | None:
        if len(text) <= self.chars + MARKER_CHARS or already_cut(text) or not recallable(key):
            return None
        head = "\n".join(text.split("\n", self.lines)[: self.lines])[: self.chars]
        self.keys += 1
        return head + marker(len(text) - len(head), key)

    def leaves(self, value: Any, uuid: str, block: int, path: tuple[str, ...]) -> Any:
        if isinstance(value, str):
            cut = self.cut(value, RecallKey(self.session_id, uuid, block, path))
            return value if cut is None else cut
        if isinstance(value, dict):
            return {k: self.leaves(v, uuid, block, (*path, str(k))) for k, v in value.items()}
        if isinstance(value, list):
            return [self.leaves(v, uuid, block, (*path, str(n))) for n, v in enumerate(value)]
        return value

    def result(self, block: dict[str, Any], uuid: str, index: int) -> dict[str, Any]:
        content = block.get("content")
        key = RecallKey(self.session_id, uuid, index)
        if isinstance(content, str):
            cut = self.cut(content, key)
            return block if cut is None else {**block, "content": cut}
        if isinstance(content, list):
            texts = [str(c.get("text", "")) for c in content if isinstance(c, dict)]
            images = sum(1 for c in content if isinstance(c, dict) and c.get("type") == "image")
            joined = "\n".join(t for t in texts if t)
            cut = self.cut(joined, key) if not images else None
            if images and recallable(key):
                self.keys += 1
                cut = joined[: self.chars] + marker(len(joined), key).replace(
                    "characters cut", f"characters and {images} image(s) cut"
                )
            return block if cut is None else {**block, "content": [{"type": "text", "text": cut}]}
        return block
