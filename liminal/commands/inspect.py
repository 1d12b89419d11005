"""``liminal inspect SESSION``: what a Claude Code session, a Codex rollout or a Gemini CLI session
holds, and what the gradient would do to it. Which CLI wrote it is detected
(``liminal.harness.gemini.report.detect``, ``liminal.harness.codex.report.detect``)."""

from __future__ import annotations

import argparse
import sys

from liminal.commands._args import count
from liminal.config import Settings

HELP = "show a Claude Code, Codex or Gemini CLI session: records, turns, tools, context, tokens by band"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="thread or session id (or a unique prefix), or a path to its .jsonl file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--largest", type=count(0), default=10, help="how many of the largest items")


def run(args: argparse.Namespace, settings: Settings) -> int:
    import orjson

    from liminal.commands._store import session_named, unknown_session
    from liminal.harness.claude import report as claude
    from liminal.harness.claude.conversation import ConversationError
    from liminal.harness.claude.paths import SessionNotFound
    from liminal.harness.claude.records import SessionFormatError
    from liminal.harness.codex import report as codex
    from liminal.harness.codex.rollout import RolloutError
    from liminal.harness.gemini import report as gemini

    session, code = session_named(settings, "inspect", args.session)
    if session is None:
        return code
    chat = gemini.detect(session)
    rollout = codex.detect(session) if chat is None else None
    try:
        if chat is not None:
            data = gemini.inspect(chat, settings.gradient, args.largest)
        elif rollout is not None:
            data = codex.inspect(rollout, settings.gradient, args.largest)
        else:
            data = claude.inspect(session, settings.gradient, args.largest)
    except SessionNotFound as exc:
        print(f"liminal inspect: {unknown_session(args.session, exc)}", file=sys.stderr)
        return 1
    except (SessionFormatError, ConversationError, RolloutError, OSError) as exc:
        print(f"liminal inspect: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(orjson.dumps(data).decode() + "\n")
        return 0
    from liminal.commands._out import Transcript

    out = Transcript()
    shown = gemini.table(data) if chat is not None else codex.table(data) if rollout is not None else claude.table(data)
    for line in shown.splitlines():
        # "types     assistant 68, ...": a long value wraps under itself, past its label.
        out.line(line, hang=10 if line[:1].isalpha() and line[8:10] == "  " else 0)
    return 0
