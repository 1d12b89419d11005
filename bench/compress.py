"""Benchmark: ``liminal compress`` against ``ccs-cloner@0.5.0`` on one large session.

    .venv/bin/python bench/compress.py [--turns 600] [--runs 5] [--keep] [--smoke]

1. Synthesizes a Claude Code 2.1.44 session of about 600 turns and 40+ MB, record for record in
   the shapes of real files (``fixtures/claude/zed-32.jsonl``, FACTS.md): one content block per
   assistant line sharing ``message.id``, parallel tool calls whose results hang off their own
   ``tool_use`` lines (off the pure parent chain), ``toolUseResult`` copies, hook ``progress``
   and ``queue-operation`` records, thinking with signatures, usage that grows with the history.
2. Installs ccs-cloner 0.5.0 from npm into ``bench/out/npm`` (ignored by git) if missing.
3. Times each tool as a child process (wall clock, peak RSS from ``getrusage`` of the child), and
   measures the context each output leaves with liminal's calibrated estimate (same calibration,
   the original file's, for both), plus what Claude Code 2.1.44's pure-chain load would see.
Prints a Markdown table for ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from liminal.harness.claude.conversation import build  # noqa: E402
from liminal.harness.claude.paths import locate  # noqa: E402
from liminal.harness.claude.records import read_session  # noqa: E402
from liminal.harness.claude.tokens import Calibration, calibrate, total_chars  # noqa: E402
from tests.support.gradient import recent_intact  # noqa: E402

CWD = "/bench/project"
WORDS = ("state", "frame", "router", "session", "token", "buffer", "result", "parse", "write",
         "config", "thread", "swap", "chain", "record", "value", "index", "error", "cache")


class Synth:
    """Writes records with the key order and shapes Claude Code 2.1.44 uses."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.sid = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.clock = 1_790_000_000.0
        self.chars = 0  # characters of history so far, for usage
        self.lines: list[bytes] = []
        self.pool = [self._code_line() for _ in range(4000)]

    def _code_line(self) -> str:
        r = self.rng
        indent = "    " * r.randint(0, 3)
        words = " ".join(r.choice(WORDS) for _ in range(r.randint(2, 9)))
        return f"{indent}{words.replace(' ', r.choice(['_', ' ', '.', '(']))}"

    def _text(self, lines: int) -> str:
        start = self.rng.randrange(0, len(self.pool) - lines) if lines < len(self.pool) else 0
        return "\n".join(self.pool[start : start + lines])

    def _id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _stamp(self) -> str:
        self.clock += self.rng.uniform(0.05, 3.0)
        t = time.gmtime(self.clock)
        return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int(self.clock * 1000) % 1000:03d}Z"

    def _base(self, parent: str | None) -> dict[str, Any]:
        return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": CWD,
                "sessionId": self.sid, "version": "2.1.44", "gitBranch": "main",
                "slug": "bench-synthetic-session"}

    def emit(self, record: dict[str, Any]) -> None:
        self.lines.append(orjson.dumps(record) + b"\n")

    def queue(self) -> None:
        for op in ("enqueue", "dequeue"):
            self.emit({"type": "queue-operation", "operation": op, "timestamp": self._stamp(),
                       "sessionId": self.sid})

    def prompt(self, parent: str | None, turn: int) -> str:
        text = f"Turn {turn}: please look at the {self.rng.choice(WORDS)} code. " + " ".join(
            self.rng.choice(WORDS) for _ in range(self.rng.randint(10, 120)))
        u = self._id()
        self.emit({**self._base(parent), "type": "user", "message": {"role": "user", "content": [
            {"type": "text", "text": text}]}, "uuid": u, "timestamp": self._stamp(),
            "permissionMode": "default"})
        self.chars += len(text)
        return u

    def assistant(self, parent: str, blocks: list[dict[str, Any]]) -> list[str]:
        mid = "msg_" + uuid.UUID(int=self.rng.getrandbits(128)).hex[:24]
        rid = "req_" + uuid.UUID(int=self.rng.getrandbits(128)).hex[:24]
        ctx = 18_000 + int(self.chars / 3.4)
        out = []
        for block in blocks:
            u = self._id()
            usage = {"input_tokens": 3, "cache_creation_input_tokens": self.rng.randint(100, 3000),
                     "cache_read_input_tokens": ctx, "output_tokens": 1,
                     "service_tier": "standard"}
            self.emit({**self._base(parent), "message": {
                "id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                "content": [block], "stop_reason": None, "stop_sequence": None, "usage": usage},
                "requestId": rid, "type": "assistant", "uuid": u, "timestamp": self._stamp()})
            out.append(u)
            parent = u
        for block in blocks:
            self.chars += len(json.dumps(block))
        return out

    def tool_call(self) -> tuple[dict[str, Any], str, dict[str, Any]]:
        r = self.rng
        tid = "toolu_" + uuid.UUID(int=r.getrandbits(128)).hex[:24]
        kind = r.choices(["Read", "Bash", "Grep", "Edit"], [4, 4, 2, 1])[0]
        size = int(min(60_000, r.lognormvariate(8.7, 1.0)))
        output = self._text(max(1, size // 40))
        if kind == "Read":
            path = f"/bench/project/src/{r.choice(WORDS)}/{r.choice(WORDS)}.py"
            tool_input: dict[str, Any] = {"file_path": path}
            structured: dict[str, Any] = {"type": "text", "file": {
                "filePath": path, "content": output, "numLines": output.count("\n") + 1,
                "startLine": 1, "totalLines": output.count("\n") + 1}}
        elif kind == "Bash":
            tool_input = {"command": f"pytest -q tests/test_{r.choice(WORDS)}.py",
                          "description": "Run the tests"}
            structured = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
        elif kind == "Grep":
            tool_input = {"pattern": r.choice(WORDS), "path": "/bench/project", "output_mode": "content"}
            structured = {"mode": "content", "numFiles": 3, "filenames": [], "content": output}
        else:
            old = self._text(r.randint(3, 40))
            new = self._text(r.randint(3, 40))
            tool_input = {"file_path": "/bench/project/src/main.py", "old_string": old, "new_string": new}
            output = "The file /bench/project/src/main.py has been updated."
            structured = {"filePath": "/bench/project/src/main.py", "oldString": old,
                          "newString": new, "structuredPatch": [], "userModified": False}
        block = {"type": "tool_use", "id": tid, "name": kind, "input": tool_input}
        return block, output, structured

    def results(self, uses: list[tuple[str, dict[str, Any], str, dict[str, Any]]]) -> str:
        order = list(range(len(uses)))
        if len(uses) > 1 and self.rng.random() < 0.3:
            self.rng.shuffle(order)  # results can land out of order
        last = ""
        for i in order:
            line_uuid, block, output, structured = uses[i]
            u = self._id()
            self.emit({**self._base(line_uuid), "type": "user", "message": {"role": "user", "content": [
                {"tool_use_id": block["id"], "type": "tool_result", "content": output,
                 "is_error": False}]}, "uuid": u, "timestamp": self._stamp(),
                "toolUseResult": structured, "sourceToolAssistantUUID": line_uuid})
            self.chars += len(output)
            last = u
        return last

    def progress(self, parent: str) -> str:
        for _ in range(2):
            u = self._id()
            self.emit({**self._base(parent), "type": "progress", "data": {
                "type": "hook_progress", "hookEvent": "Stop", "hookName": "Stop", "command": "callback"},
                "parentToolUseID": None, "toolUseID": None, "uuid": u, "timestamp": self._stamp()})
            parent = u
        return parent

    def session(self, turns: int) -> None:
        parent: str | None = None
        for turn in range(turns):
            self.queue()
            parent = self.prompt(parent, turn)
            for _ in range(self.rng.choice([1, 1, 2, 2, 3])):
                blocks: list[dict[str, Any]] = []
                if self.rng.random() < 0.2:
                    blocks.append({"type": "thinking", "thinking": self._text(6),
                                   "signature": "Eq" + "A" * 300})
                blocks.append({"type": "text", "text": "I will check the " + self._text(2)})
                calls = [self.tool_call() for _ in range(self.rng.choice([1, 1, 2, 3]))]
                uuids = self.assistant(parent, blocks + [c[0] for c in calls])
                uses = list(zip(uuids[len(blocks):], *zip(*calls, strict=True), strict=True))
                parent = self.results(uses)
            final = self.assistant(parent, [{"type": "text", "text": "Done: " + self._text(4)
                                             + " We decided to keep the " + self.rng.choice(WORDS)}])
            parent = self.progress(final[-1])


def synthesize(path: Path, turns: int, seed: int) -> str:
    synth = Synth(seed)
    synth.session(turns)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_name(f"{synth.sid}.jsonl").write_bytes(b"".join(synth.lines))
    return synth.sid


MEASURE = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "maxrss_kb": ru.ru_maxrss, "rc": p.returncode,
                  "stdout": p.stdout.decode(errors="replace")[-4000:],
                  "stderr": p.stderr.decode(errors="replace")[-4000:]}))
"""


def measure(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, env=env,
                          check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"{cmd[:3]} failed: {result['stderr']}")
    return result


def context_left(path: Path, cal: Calibration) -> dict[str, Any]:
    """Tokens the new file gives the model (gathered view), and what a pure-chain load sees."""
    conv = build(read_session(locate(path)))
    chars = sum(total_chars(r) for r in conv.records)
    pure: set[str] = set()
    by_uuid = {r.uuid: r for r in conv.session.records if r.uuid}
    cursor = conv.leaf
    while cursor is not None:
        pure.add(cursor.uuid or "")
        cursor = by_uuid.get(cursor.parent) if cursor.parent else None
    pairs = len(set(conv.tool_uses) & set(conv.tool_results))
    pure_pairs = sum(1 for t, r in conv.tool_results.items()
                     if r.uuid in pure and conv.tool_uses.get(t) is not None
                     and conv.tool_uses[t].uuid in pure)
    return {"tokens": cal.overhead_tokens + cal.tokens(chars), "turns": len(conv.turns),
            "tool_pairs": pairs, "pairs_on_pure_chain": pure_pairs, "bytes": path.stat().st_size}


def node_version() -> str:
    if shutil.which("node") is None:
        return "(none)"
    return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()


def ensure_ccs_cloner() -> Path:
    prefix = OUT / "npm"
    cli = prefix / "node_modules" / "ccs-cloner" / "dist" / "cli.js"
    if not cli.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                        "ccs-cloner@0.5.0"], check=True, capture_output=True)
    return cli


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=600)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--target-tokens", type=int, default=100_000)
    ap.add_argument("--keep", action="store_true", help="keep bench/out/claude afterwards")
    ap.add_argument("--smoke", action="store_true",
                    help="liminal alone (no npm), a small session, in a temporary folder: does it still run")
    a = ap.parse_args()
    out = OUT
    if a.smoke:
        a.turns, a.runs, a.keep = 20, 1, False
        out = Path(tempfile.mkdtemp(prefix="liminal-compress-smoke-"))

    claude = out / "claude"
    shutil.rmtree(claude, ignore_errors=True)
    project = claude / "projects" / CWD.replace("/", "-")
    t = time.perf_counter()
    sid = synthesize(project / "x.jsonl", a.turns, a.seed)
    source = project / f"{sid}.jsonl"
    print(f"synthesized {source.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t:.1f} s")
    conv = build(read_session(locate(source)))
    cal = calibrate(conv)
    before = context_left(source, cal)
    cli = None if a.smoke else ensure_ccs_cloner()  # smoke: no npm, no network

    env = {**os.environ, "LIMINAL_HOME": str(out / "home"), "CLAUDE_CONFIG_DIR": str(claude)}
    rows: dict[str, Any] = {}
    runs = {
        "liminal compress": lambda new: [sys.executable, "-m", "liminal", "compress", str(source),
                                         "--json", "--target-tokens", str(a.target_tokens),
                                         "--new-id", new],
        "ccs-cloner (default)": lambda new: ["node", str(cli), "clone", sid, "--strip-tools",
                                             "--claude-dir", str(claude), "--json",
                                             "-o", str(project / f"{new}.jsonl")],
        "ccs-cloner (extreme)": lambda new: ["node", str(cli), "clone", sid, "--strip-tools=extreme",
                                             "--claude-dir", str(claude), "--json",
                                             "-o", str(project / f"{new}.jsonl")],
    }
    if cli is None:
        runs = {name: command for name, command in runs.items() if name.startswith("liminal")}
    walls: dict[str, list[float]] = {name: [] for name in runs}
    rss: dict[str, list[int]] = {name: [] for name in runs}
    lasts: dict[str, tuple[dict[str, Any], Path]] = {}
    for n in range(a.runs):  # interleaved, so a noisy neighbour hurts every tool alike
        for name, command in runs.items():
            new = str(uuid.uuid4())
            new_path = project / f"{new}.jsonl"
            result = measure(command(new), env)
            walls[name].append(result["wall"])
            rss[name].append(result["maxrss_kb"])
            if n == a.runs - 1:
                lasts[name] = (result, new_path)
            else:
                new_path.unlink()
    for name in runs:
        last, new_path = lasts[name]
        left = context_left(new_path, cal)
        intact = None
        if name.startswith("liminal"):
            info = json.loads(last["stdout"])
            intact = recent_intact(source, new_path, info["turns"]["recent"])
        rows[name] = {"wall_s": statistics.median(walls[name]), "wall_min_s": min(walls[name]),
                      "peak_rss_mb": max(rss[name]) / 1024, **left, "recent_intact": intact}
        new_path.unlink()

    size_mb = source.stat().st_size / 1e6
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"\nmachine: {os.cpu_count()} CPUs, {cpu}; Python {platform.python_version()}; "
          f"node {node_version()}; "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"session: {size_mb:.1f} MB, {len(conv.session.records):,} records, {before['turns']} turns, "
          f"{before['tool_pairs']} tool calls ({before['pairs_on_pure_chain']} on the pure parent "
          f"chain), context {before['tokens']:,} tokens (estimate; file's last usage "
          f"{conv.records[-1].context_tokens or 0:,})\n")
    print(f"| tool | wall, median of {a.runs} (min) | peak RSS | context left | turns | tool pairs "
          "(pure chain) | file | recent band intact |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['wall_s']:.3f} s ({row['wall_min_s']:.3f}) | {row['peak_rss_mb']:.0f} MB | "
              f"{row['tokens']:,} | {row['turns']} | {row['tool_pairs']} ({row['pairs_on_pure_chain']}) "
              f"| {row['bytes'] / 1e6:.2f} MB | {'yes' if row['recent_intact'] else '-' if row['recent_intact'] is None else 'NO'} |")
    if not a.keep:
        shutil.rmtree(claude, ignore_errors=True)
    if a.smoke:
        shutil.rmtree(out, ignore_errors=True)
    return 0 if all(row["recent_intact"] is not False for row in rows.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
