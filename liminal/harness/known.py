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

    def gemini() -> SessionHarness:
        from liminal.harness.gemini.live import GeminiSessions

        return GeminiSessions(gradient, env)

    return {"claude": claude, "codex": codex, "gemini": gemini}


LineParser = Callable[[bytes, str, "str | None", int], "SessionRecord"]


def find_session_file(backing_id: str, cwd: str | None = None,
                      env: Mapping[str, str] | None = None) -> Path | None:
    """The session file of a backing id, whichever CLI wrote it (the indexer tails it)."""
    from liminal.harness.claude.paths import find as find_claude
    from liminal.harness.codex.rollout import find as find_codex
    from liminal.harness.gemini.chatfile import find as find_gemini

    return find_claude(backing_id, cwd, env) or find_codex(backing_id, env) or find_gemini(backing_id, cwd, env)


def _cli_of(path: Path) -> str:
    """Whose session file ``path`` is, by its name: Codex's ``rollout-...-<id>.jsonl``, Gemini
    CLI's ``session-<minute>-<id8>.jsonl``, else Claude Code's ``<id>.jsonl``."""
    from liminal.harness.codex.rollout import session_id_of
    from liminal.harness.gemini.chatfile import is_chat_file

    if session_id_of(path) is not None:
        return "codex"
    return "gemini" if is_chat_file(path) else "claude"


def harness_of(path: Path, env: Mapping[str, str] | None = None) -> SessionHarness:
    """The harness of the CLI whose session file ``path`` is (the indexer asks it which files
    beside the session a line refers to: ``SessionHarness.beside_in``)."""
    from liminal.config import GradientSettings

    return known_harnesses(GradientSettings(), env)[_cli_of(path)]()


def line_parser(path: Path) -> LineParser:
    """How the indexer turns a line of ``path`` into a store record, by whose file it is."""
    cli = _cli_of(path)
    if cli == "codex":
        from liminal.harness.codex.records import parse_line as codex_line

        return codex_line
    if cli == "gemini":
        from liminal.harness.gemini.records import parse_line as gemini_line

        return gemini_line
    from liminal.harness.claude.sessionfile import parse_line as claude_line

    return claude_line


def conversation_record_types() -> frozenset[str]:
    """The session record types, of every CLI, that hold the conversation (search looks only in
    these unless asked for everything; ``liminal.lookup.search``)."""
    from liminal.harness.claude.sessionfile import CONVERSATION_TYPES as CLAUDE
    from liminal.harness.codex.records import CONVERSATION_TYPES as CODEX
    from liminal.harness.gemini.records import CONVERSATION_TYPES as GEMINI

    return CLAUDE | CODEX | GEMINI


def record_role(record_type: str | None, tool_ids: Sequence[str]) -> str | None:
    """Who a stored session record speaks for: ``you``, ``model``, ``tool call``, ``tool
    output`` (``message`` when the record does not say); None for a CLI's bookkeeping."""
    from liminal.harness.claude.sessionfile import record_role as claude
    from liminal.harness.codex.records import record_role as codex
    from liminal.harness.gemini.records import record_role as gemini

    return claude(record_type, tool_ids) or codex(record_type, tool_ids) or gemini(record_type, tool_ids)
