#!/usr/bin/env python3
"""What a summary by the model costs the CLI beside liminal's request (issue 24), measured with
the real adapters against the rig's fake model servers on loopback.

    LIMINAL_HARNESS_DIR=... python bench/side_session.py [ADAPTER ...]   # default: all four
    python bench/side_session.py --smoke                                  # claude-agent, the fork only

For each adapter:

- **the side session**: a scripted conversation through ``liminal acp`` with ``swap.summaries``
  on and a low trigger; every request the model server gets that carries liminal's summary
  request is a side session's: its size, the part that is liminal's request, and the rest, the
  CLI's own (system prompt, tools, context messages, a title request). That rest is
  ``SessionHarness.side_session_tokens``, which the swap policy and ``bench/cost.py`` price.
- **the fork** (where the adapter advertises ``session/fork``): five turns straight to the
  adapter, then ``session/fork`` and one prompt in the fork; the fork's request is compared
  part by part (tools, system or instructions, cache key, each message) with the live
  session's last, to see whether its prefix could be read from the prompt cache.

Tokens are counted as the fake servers count them (four bytes each). Figures and what was made
of them: ``docs/gradient.md``, "What summaries cost" and "A summary in a fork of the live session".
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.harness import SUMMARIES_ON, Reply, Rig, Scenario, Shell, Text, adapters  # noqa: E402
from fixtures.harness.anthropic import tokens  # noqa: E402
from fixtures.harness.httpserver import RecordedRequest  # noqa: E402
from fixtures.harness.script import SUMMARY_REQUEST  # noqa: E402
from tests.support.listing import LISTING  # noqa: E402

SKIPPED = 77  # what a smoke run exits with when it cannot run here (tests/integration/test_bench_smoke.py)
ADAPTERS = ["claude-agent", "claude-agent-101", "codex-zed", "codex-agent"]
SUMMARY = "## STATE\nGoal: measure\n## SUMMARY\nThe turns were measured."
KINDS = ["plain question", "BASH list", "PAR count", "BIG read", "plain follow-up"]


def scenario() -> Scenario:
    return (Scenario().summarise(SUMMARY, SUMMARY)
            .add("BASH", Shell(LISTING, "List"), "listed them")
            .add("PAR", Reply((Text("Three at once."), Shell("seq 1 40", "a"), Shell("seq 1 60", "b"))),
                 "counted them")
            .add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it"))


def model_requests(rig: Rig) -> list[RecordedRequest]:
    with rig.server._lock:
        return [r for r in rig.server.requests if r.route.endswith(("/v1/messages", "/responses"))]


def request_text(body: dict[str, Any]) -> int:
    """Characters of liminal's summary request in a request body (Claude Code's title request
    quotes it clipped; count what is there)."""
    found = 0
    for message in body.get("messages") or body.get("input") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks = content if isinstance(content, list) else [{"text": content}]
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and SUMMARY_REQUEST in text:
                found += len(text)
    return found


def side_sessions(name: str, root: Path, turns: int) -> list[dict[str, Any]]:
    """The side sessions' requests of a conversation through liminal with summaries on."""
    rig = Rig.start(adapters()[name], root, scenario())
    try:
        base = rig.overhead()
        rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
        (rig.home.liminal_home / "config.toml").write_text(
            f"[swap]\nhigh_tokens = {base + 9_000}\nhold_timeout_seconds = 60\n"
            "summary_at = 0.5\nsummary_turns_ahead = 50\n"
            "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 600\nsummary_tokens = 600\n")
        start = len(model_requests(rig))
        with rig.client(via_liminal=True, env=SUMMARIES_ON) as client:  # off in the rig unless asked
            client.initialize()
            thread = client.new_session(rig.home.project)["sessionId"]
            for n in range(turns):
                client.prompt(thread, f"turn {n}: {KINDS[n % len(KINDS)]} please", timeout=180)
        rows = []
        for request in model_requests(rig)[start:]:
            if SUMMARY_REQUEST.encode() not in request.raw:
                continue
            body = request.json or {}
            total, ours = tokens(len(request.raw)), request_text(body) // 4
            rows.append({"total": total, "liminal": ours, "cli": total - ours,
                         "tools": len(body.get("tools") or [])})
        print(f"{name}: the CLI's own prompt in a conversation {base:,} tokens", file=sys.stderr)
        return rows
    finally:
        rig.stop()


def parts(body: dict[str, Any]) -> list[tuple[str, str, int]]:
    """A request's parts in cache order, each (name, digest, bytes): the cache marks left out of
    the digest (the CLI moves them along; the cache does not match on them)."""
    def digest(value: Any) -> str:
        clean = _without(value, {"cache_control"})
        return hashlib.blake2b(orjson.dumps(clean, option=orjson.OPT_SORT_KEYS), digest_size=8).hexdigest()

    head = [(key, body.get(key)) for key in ("tools", "system", "instructions") if key in body]
    items = [(f"message {n}", m) for n, m in enumerate(body.get("messages") or body.get("input") or [])]
    return [(label, digest(value), len(orjson.dumps(value))) for label, value in head + items]


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def fork(name: str, root: Path, turns: int) -> dict[str, Any] | None:
    """The fork's request against the live session's last, or None (no ``session/fork``)."""
    rig = Rig.start(adapters()[name], root, scenario())
    try:
        with rig.client(via_liminal=False) as client:
            caps = (client.initialize().get("agentCapabilities") or {}).get("sessionCapabilities") or {}
            if "fork" not in caps:
                return None
            thread = client.new_session(rig.home.project)["sessionId"]
            for n in range(turns):
                client.prompt(thread, f"turn {n}: {KINDS[n % len(KINDS)]} please", timeout=180)
            # The live session's last request of the conversation (not a title request after it).
            live = [r for r in model_requests(rig) if (r.json or {}).get("tools")][-1]
            start = len(model_requests(rig))
            forked = client.request("session/fork", {"sessionId": thread, "cwd": str(rig.home.project),
                                                      "mcpServers": []}, timeout=120)["sessionId"]
            client.prompt(forked, f"{SUMMARY_REQUEST} for the assistant. Do not use any tools.", timeout=180)
            made = model_requests(rig)[start:]
            asked = next(r for r in made if SUMMARY_REQUEST.encode() in r.raw)
            a, b = parts(live.json or {}), parts(asked.json or {})
            same, differ = 0, []
            for x, y in zip(a, b, strict=False):
                if x[1] != y[1]:
                    differ.append(x[0])
                elif not differ:
                    same += x[2]  # the prefix the cache could match, up to the first difference
            key = "prompt_cache_key"
            if (live.json or {}).get(key) != (asked.json or {}).get(key):
                differ.append(key)
            files = sorted(p.name for p in rig.home.claude_config.glob("projects/*/*.jsonl"))
            return {"live": tokens(len(live.raw)), "fork": tokens(len(asked.raw)), "requests": len(made),
                    "same": tokens(same), "differ": differ, "claude_files_in_project": len(files)}
    finally:
        rig.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapters", nargs="*", default=ADAPTERS)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--smoke", action="store_true",
                        help="claude-agent's fork in two turns: does it still run (exit 77 without the harness)")
    args = parser.parse_args(argv)
    names = ["claude-agent"] if args.smoke else args.adapters
    missing = [r for r in (adapters()[n].missing_reason() for n in names) if r]
    if missing:
        print(f"cannot run here: {missing[0]}", file=sys.stderr)
        return SKIPPED if args.smoke else 1
    with tempfile.TemporaryDirectory(prefix="liminal-side-") as tmp:
        if not args.smoke:
            print("| adapter | side session requests | total, each | liminal's request | the CLI's own |\n"
                  "|---|---:|---|---|---|")
            for name in names:
                rows = side_sessions(name, Path(tmp) / f"side-{name}", args.turns)
                total, ours, cli = (", ".join(f"{r[key]:,}" for r in rows[:4]) for key in ("total", "liminal", "cli"))
                print(f"| {name} | {len(rows)} | {total} | {ours} | {cli} |")
        print("\n| adapter | live request | fork's request | requests in the fork | the same from the start | parts that differ |\n"
              "|---|---:|---:|---:|---:|---|")
        for name in names:
            found = fork(name, Path(tmp) / f"fork-{name}", 2 if args.smoke else 5)
            if found is None:
                print(f"| {name} | no `session/fork` | | | | |")
                continue
            print(f"| {name} | {found['live']:,} | {found['fork']:,} | {found['requests']} | "
                  f"{found['same']:,} | {', '.join(found['differ']) or 'none'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
