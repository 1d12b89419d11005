"""``liminal compress SESSION``: write a compressed copy of a Claude Code session, a Codex rollout
or a Gemini CLI session (detected, not flagged) under a new id, beside the CLI's own."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from liminal.config import Settings

HELP = "write a compressed copy of a Claude Code, Codex or Gemini CLI session under a new id"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="thread or session id (or a unique prefix), or a path to its .jsonl file")
    parser.add_argument("--target-tokens", type=int, help="context to aim for (gradient.target_tokens)")
    parser.add_argument("--dry-run", action="store_true", help="plan and validate, write nothing")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--new-id", help=argparse.SUPPRESS)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {"gradient.target_tokens": args.target_tokens}


class _Progress:
    """One line on stderr, redrawn, only on a terminal and only for files worth waiting on."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, phase: str, done: int, total: int) -> None:
        if total < (8 << 20) and not self.shown:
            return
        self.shown = True
        pct = 100 * done // max(total, 1)
        sys.stderr.write(f"\r{phase}: {pct:3d}%")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def run(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    import orjson

    from liminal.harness.claude.conversation import ConversationError
    from liminal.harness.claude.gradient.rewrite import rewrite_session
    from liminal.harness.claude.gradient.validate import ValidationError
    from liminal.harness.claude.paths import SessionNotFound, is_session_id, locate
    from liminal.harness.claude.records import SessionFormatError
    from liminal.harness.codex import report as codex
    from liminal.sessionfiles import RewriteError

    # It names the file written (both CLIs): checked before it becomes a path.
    if args.new_id is not None and not is_session_id(args.new_id):
        print(f"liminal compress: --new-id {args.new_id!r} is not a session id", file=sys.stderr)
        return 2
    from liminal.commands._store import session_named, unknown_session

    session, code = session_named(settings, "compress", args.session)
    if session is None:
        return code
    from liminal.harness.gemini import report as gemini

    chat = gemini.detect(session)
    if chat is not None:
        return _gemini(chat, args, settings)
    rollout = codex.detect(session)
    if rollout is not None:
        return _codex(rollout, args, settings)
    try:
        found = locate(session, cwd=Path.cwd())
    except SessionNotFound as exc:
        print(f"liminal compress: {unknown_session(args.session, exc)}", file=sys.stderr)
        return 1
    progress = _Progress() if sys.stderr.isatty() else None
    try:
        result = rewrite_session(
            found,
            settings.gradient.target_tokens,
            args.new_id,
            settings=settings.gradient,
            dry_run=args.dry_run,
            progress=progress,
        )
    except (SessionNotFound, SessionFormatError, ConversationError) as exc:
        print(f"liminal compress: {exc}", file=sys.stderr)
        return 1
    except (ValidationError, RewriteError, OSError) as exc:
        print(f"liminal compress: {exc}; nothing written", file=sys.stderr)
        return 1
    finally:
        if progress is not None:
            progress.close()
    if args.json:
        sys.stdout.write(orjson.dumps(result.as_json()).decode() + "\n")
        return 0
    turns = ", ".join(f"{n} {band}" for band, n in result.turns.items())
    print(f"session   {result.source_session_id}  ({result.bytes_before:,} bytes)")
    print(f"context   {result.tokens_before:,} -> {result.tokens_after:,} tokens "
          f"(target {result.target_tokens:,})")
    print(f"turns     {turns}")
    print(f"records   {result.records_before:,} -> {result.records_after:,}; "
          f"{result.recall_keys} recall keys; {result.seconds:.2f} s")
    for note in result.notes:
        print(f"note      {note}")
    if result.written:
        print(f"wrote     {result.path}")
        print(f"resume    cd {result.cwd} && claude --resume {result.new_session_id}")
    else:
        print(f"dry run: would write {result.path}")
    return 0


def _codex(path: Path, args: argparse.Namespace, settings: Settings) -> int:

    from liminal.harness.codex import report as codex
    from liminal.harness.codex.rollout import RolloutError
    from liminal.sessionfiles import RewriteError

    try:
        result = codex.compress(path, settings.gradient, args.new_id, args.dry_run)
    except (RolloutError, RewriteError, OSError) as exc:
        print(f"liminal compress: {exc}; nothing written", file=sys.stderr)
        return 1
    return _said(result, args.json, "Codex", f"cd {result['cwd']} && codex resume {result['new_session_id']}")


def _gemini(path: Path, args: argparse.Namespace, settings: Settings) -> int:

    from liminal.harness.gemini import report as gemini
    from liminal.sessionfiles import RewriteError, SessionNotFound

    try:
        result = gemini.compress(path, settings.gradient, args.new_id, args.dry_run)
    except (SessionNotFound, RewriteError, OSError) as exc:
        print(f"liminal compress: {exc}; nothing written", file=sys.stderr)
        return 1
    where = f"cd {result['project']} && " if result["project"] else ""
    return _said(result, args.json, "Gemini CLI", f"{where}gemini --resume {result['new_session_id']}")


def _said(result: dict[str, Any], as_json: bool, cli: str, resume: str) -> int:
    """What ``compress`` wrote (or would) for a CLI whose report is a dict (Codex, Gemini CLI)."""
    import orjson

    if as_json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
        return 0
    turns = ", ".join(f"{n} {band}" for band, n in result["turns"].items())
    print(f"session   {result['source_session_id']}  ({result['bytes_before']:,} bytes, {cli})")
    print(f"context   {result['tokens_before']:,} -> {result['tokens_after']:,} tokens "
          f"(target {result['target_tokens']:,})")
    print(f"turns     {turns}")
    print(f"records   {result['records_before']:,} -> {result['records_after']:,}; "
          f"{result['recall_keys']} recall keys; {result['seconds']:.2f} s")
    if result["written"]:
        print(f"wrote     {result['path']}")
        print(f"resume    {resume}")
    else:
        print(f"dry run: would write {result['path']}")
    return 0
