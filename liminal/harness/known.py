"""The harnesses liminal knows, and what asks each of them in turn: which CLI's file a session is,
how the indexer reads its lines, which of its records are the conversation.

Here, not in ``base.py``: the seam (``SessionHarness``) is what the kernel and the indexer
depend on, and it must not depend on the CLIs that implement it (that made a circle of
``base``, both ``live.py`` and ``codex/report``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from liminal.harness.base import Factory, SessionHarness

if TYPE_CHECKING:
    from liminal.store.records import SessionRecord


def known_harnesses(gradient: Any, env: Mapping[str, str] | None = None) -> dict[str, Factory]:
    """Every harness liminal has, by name, each made when first asked for."""
    def claude() -> SessionHarness:
        from liminal.harness.claude.live import ClaudeSessions

        return ClaudeSessions(gradient, env)

    def codex() -> SessionHarness:
        from liminal.harness.codex.live import CodexSessions

        return CodexSessions(gradient, env)

    return {"claude": claude, "codex": codex}


LineParser = Callable[[bytes, str, "str | None", int], "SessionRecord"]


def find_session_file(backing_id: str, cwd: str | None = None,
                      env: Mapping[str, str] | None = None) -> Path | None:
    """The session file of a backing id, whichever CLI wrote it (the indexer tails it)."""
    from liminal.harness.claude.paths import find as find_claude
    from liminal.harness.codex.rollout import find as find_codex

    return find_claude(backing_id, cwd, env) or find_codex(backing_id, env)


def harness_of(path: Path, env: Mapping[str, str] | None = None) -> SessionHarness:
    """The harness of the CLI whose session file ``path`` is (the indexer asks it which files
    beside the session a line refers to: ``SessionHarness.beside_in``)."""
    from liminal.config import GradientSettings
    from liminal.harness.codex.rollout import session_id_of

    factories = known_harnesses(GradientSettings(), env)
    return factories["codex" if session_id_of(path) is not None else "claude"]()


def line_parser(path: Path) -> LineParser:
    """How the indexer turns a line of ``path`` into a store record, by whose file it is."""
    from liminal.harness.codex.rollout import session_id_of

    if session_id_of(path) is not None:
        from liminal.harness.codex.records import parse_line as codex_line

        return codex_line
    from liminal.harness.claude.sessionfile import parse_line as claude_line

    return claude_line


def conversation_record_types() -> frozenset[str]:
    """The session record types, of every CLI, that hold the conversation (search looks only in
    these unless asked for everything; ``liminal.lookup.search``)."""
    from liminal.harness.claude.sessionfile import CONVERSATION_TYPES as CLAUDE
    from liminal.harness.codex.records import CONVERSATION_TYPES as CODEX

    return CLAUDE | CODEX


def record_role(record_type: str | None, tool_ids: Sequence[str]) -> str | None:
    """Who a stored session record speaks for: ``you``, ``model``, ``tool call``, ``tool
    output`` (``message`` when the record does not say); None for a CLI's bookkeeping."""
    from liminal.harness.claude.sessionfile import record_role as claude
    from liminal.harness.codex.records import record_role as codex

    return claude(record_type, tool_ids) or codex(record_type, tool_ids)
