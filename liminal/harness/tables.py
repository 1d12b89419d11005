"""What ``liminal inspect`` prints of any CLI's session (its facts, the turns by band, what the
gradient would leave, the largest items) and what ``liminal compress`` says of any CLI's rewrite:
each CLI's report gives its own data, and these are the rows and figures they share."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from liminal.config import GradientSettings
from liminal.gradient.bands import Band
from liminal.units import tokens


class Rewritten(Protocol):
    """What a CLI's gradient gives back of a rewrite, as ``compress`` reports it."""

    @property
    def lines(self) -> Sequence[bytes]: ...
    @property
    def bands(self) -> Sequence[Band]: ...
    @property
    def tokens_before(self) -> int | None: ...
    @property
    def tokens_after(self) -> int: ...
    @property
    def recall_keys(self) -> int: ...


def file_rows(data: dict[str, Any], context_is: str) -> list[str]:
    """The rows after the session's: the file, its records by type, the turns, the context
    (``context_is``: what the CLI's file says it from)."""
    return [
        f"file      {data['path']} ({data['bytes']:,} bytes, {data['records']:,} records)",
        "types     " + ", ".join(f"{k} {v}" for k, v in data["records_by_type"].items()),
        f"turns     {data['turns']}, {data['tool_calls']} tool calls",
        f"context   {tokens(data['context_tokens']) if data['context_tokens'] else 'unknown'} tokens "
        f"({context_is})",
    ]


def rewrite_figures(result: Rewritten, settings: GradientSettings, records_before: int,
                    started: float) -> dict[str, Any]:
    """``compress``'s figures of a rewrite (``started``: ``time.perf_counter()`` before it)."""
    turns = Counter(b.value for b in result.bands)
    return {
        "bytes_after": sum(len(line) for line in result.lines),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "target_tokens": settings.target_tokens,
        "turns": {b.value: turns.get(b.value, 0) for b in Band},
        "records_before": records_before,
        "records_after": len(result.lines),
        "recall_keys": result.recall_keys,
        "seconds": round(time.perf_counter() - started, 4),
    }


def bands_and_largest(data: dict[str, Any], item: str) -> list[str]:
    """The rows: ``data["bands"]``, ``planned_tokens``, ``target_tokens`` and ``largest`` (each
    ``{item: n, "kind", "tokens"}``; ``item`` names what ``n`` counts: a line, a message)."""
    out = ["", f"{'band':<10}{'turns':>7}{'tokens now':>12}"]
    for name, band in data["bands"].items():
        out.append(f"{name:<10}{band['turns']:>7}{band['tokens']:>12,}")
    out.append(f"after the gradient: about {tokens(data['planned_tokens'])} tokens "
               f"(target {tokens(data['target_tokens'])})")
    out += ["", f"{item:>7}  {'tokens':>8}  what"]
    out += [f"{i[item]:>7}  {i['tokens']:>8,}  {i['kind']}" for i in data["largest"]]
    return out
