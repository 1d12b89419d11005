"""``liminal inspect`` on a Claude Code session: what it holds, and what the gradient would do
to it (``liminal.commands.inspect`` prints it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from liminal.config import GradientSettings
from liminal.gradient.bands import Band
from liminal.harness.claude.conversation import Conversation, build
from liminal.harness.claude.gradient.plan import Plan, make_plan, turn_cost
from liminal.harness.claude.paths import locate
from liminal.harness.claude.records import read_session
from liminal.harness.claude.tokens import context_size, estimate, total_chars
from liminal.units import tokens


def _by_band(conversation: Conversation, plan: Plan) -> dict[str, dict[str, int]]:
    """Each band's turns and what they weigh now, whole."""
    out: dict[str, dict[str, int]] = {}
    for band in Band:
        turns = [t for t in conversation.turns if t.number in plan.bands[band]]
        out[band.value] = {"turns": len(turns), "tokens": sum(
            plan.calibration.tokens(turn_cost(t, Band.RECENT, 0)) for t in turns)}
    return out


def bands(path: Path, settings: GradientSettings, env: Mapping[str, str] | None = None) -> dict[str, dict[str, int]]:
    """The session's turns as a rewrite to ``settings.target_tokens`` would band them (``/context``)."""
    conversation = build(read_session(locate(path, env=env)))
    return _by_band(conversation, make_plan(conversation, settings))


def inspect(session_ref: str, settings: GradientSettings, largest: int = 10) -> dict[str, Any]:
    location = locate(session_ref, cwd=Path.cwd())
    session = read_session(location)
    conversation = build(session)
    plan = make_plan(conversation, settings)
    cal = plan.calibration
    items = sorted(conversation.records, key=total_chars, reverse=True)[:largest]
    return {
        "session_id": location.session_id,
        "path": str(location.path),
        "bytes": session.size,
        "records": len(session.records),
        "records_by_type": dict(Counter(r.type for r in session.records).most_common()),
        "conversation_records": len(conversation.records),
        "off_chain_gathered": conversation.gathered,
        "compact_boundary": conversation.boundary is not None,
        "turns": len(conversation.turns),
        "tool_calls": len(conversation.tool_uses),
        "unpaired_tool_calls": len(conversation.unpaired_uses),
        "context_tokens": context_size(conversation),
        "estimate": {
            "overhead": cal.overhead_tokens,
            "chars_per_token": round(cal.chars_per_token, 2),
            "calibrated": cal.measured,
            "by_category": estimate(conversation.records, cal).by_category,
        },
        "bands": _by_band(conversation, plan),
        "planned_tokens": plan.tokens_planned,
        "target_tokens": settings.target_tokens,
        "largest": [
            {
                "line": r.line,
                "type": r.type,
                "uuid": r.uuid,
                "what": ", ".join(f"{b.kind}:{b.name}" if b.name else b.kind for b in r.blocks),
                "tokens": cal.tokens(total_chars(r)),
            }
            for r in items
        ],
        "subagent_files": len(location.subagent_files()),
        "tool_result_files": len(list(location.tool_results_dir.glob("*")))
        if location.tool_results_dir.is_dir()
        else 0,
        "torn_tail": session.torn_tail is not None,
        "corrupt_lines": len(session.corrupt_lines),
        "broken_parent": conversation.broken_parent,
    }


def table(data: dict[str, Any]) -> str:
    out = [
        f"session   {data['session_id']}",
        f"file      {data['path']} ({data['bytes']:,} bytes, {data['records']:,} records)",
        "types     " + ", ".join(f"{k} {v}" for k, v in data["records_by_type"].items()),
        f"chain     {data['conversation_records']:,} records in the conversation "
        f"({data['off_chain_gathered']} off the pure parent chain), {data['turns']} turns, "
        f"{data['tool_calls']} tool calls",
        f"beside    {data['subagent_files']} subagent transcripts, "
        f"{data['tool_result_files']} tool-result files",
        f"context   {tokens(data['context_tokens']) if data['context_tokens'] else 'unknown'} tokens by "
        f"usage; overhead {tokens(data['estimate']['overhead'])}, "
        f"{data['estimate']['chars_per_token']} chars/token",
        "",
        f"{'category':<16}{'tokens':>10}",
    ]
    for name, value in data["estimate"]["by_category"].items():
        out.append(f"{name:<16}{value:>10,}")
    out += ["", f"{'band':<10}{'turns':>7}{'tokens now':>12}"]
    for name, band in data["bands"].items():
        out.append(f"{name:<10}{band['turns']:>7}{band['tokens']:>12,}")
    out.append(f"after the gradient: about {tokens(data['planned_tokens'])} tokens "
               f"(target {tokens(data['target_tokens'])})")
    out += ["", f"{'line':>7}  {'tokens':>8}  what"]
    for item in data["largest"]:
        out.append(f"{item['line']:>7}  {item['tokens']:>8,}  {item['type']}: {item['what']}")
    for flag, text in (("torn_tail", "torn last line ignored"), ("broken_parent", "chain broken")):
        if data[flag]:
            out.append(f"note: {text}")
    return "\n".join(out)
