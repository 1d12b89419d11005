"""Benchmark: the pause a held prompt sees while liminal swaps a live Claude Code session.

    LIMINAL_HARNESS_DIR=/work/harness-cache .venv/bin/python bench/swap.py \\
        [--sizes 50000,150000,400000,1000000] [--repeat 3] [--adapters claude-zed,claude-agent] [--smoke]

For each size, a Claude Code 2.1.44 session of about that many tokens of history is synthesized
with ``bench/compress.py``'s generator. For each adapter, size and repeat, in a fresh world (the
project's acceptance rig: the real adapter and CLI, a fake Anthropic server on loopback):

1. a fresh copy of the session goes into the rig's Claude project folder;
2. ``liminal acp`` starts with ``[swap] high_tokens`` at 0.9 and ``target_tokens`` at 0.6 of the
   context the agent reports for the session (measured beforehand on the adapter alone, see
   ``probe``), so the end of the first turn after loading triggers a swap whose rewrite is worth
   committing;
3. the client sends ``initialize``, ``session/load`` of the session, prompt 1 (its end triggers the
   swap and the hold), then at once prompt 2 (held until the swap is over), then, a second
   later, prompt 3 (no swap, no hold: the baseline);
4. the pause the user sees is prompt 2's latency minus prompt 3's. The journal gives the hold's
   ``duration_s`` and outcome (must be ``committed``), liminal's debug log the split of the hold:
   settle (the turn reaching the file), decide (reading the context size from the file when the
   adapter sends no ``usage_update``), rewrite (the gradient), move (``session/resume`` or
   ``session/load`` and re-applying mode and options).

The synthetic thinking signatures do not match the fake server's key, so the server runs with
``strict = False`` (it answers every request; it does not check the history).
The probe also times ``session/new``, ``session/resume`` and the prompts after it on the adapter
alone, to tell the CLI's share of the move from liminal's. Prints one line per run and Markdown
tables for ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compress import CWD, Synth  # noqa: E402

from fixtures.harness import AcpClient, Rig, Scenario, adapters  # noqa: E402
from fixtures.harness.anthropic import FakeAnthropic, tokens  # noqa: E402
from liminal.harness.claude.conversation import build  # noqa: E402
from liminal.harness.claude.paths import encode_cwd, locate  # noqa: E402
from liminal.harness.claude.records import read_session  # noqa: E402
from liminal.harness.claude.tokens import context_size  # noqa: E402
from liminal.kernel.journal import SwapJournal  # noqa: E402

SKIPPED = 77  # what a smoke run exits with when it cannot run here (tests/integration/test_bench_smoke.py)
SEED = 4
TOKENS_PER_TURN = 8_700  # about, for this generator; refined by measuring


@dataclass
class Session:
    wanted: int
    turns: int
    sid: str
    data: bytes
    tokens: int  # liminal's estimate of the history (context_size)


@dataclass
class Run:
    adapter: str
    size: int
    outcome: str = ""
    load_s: float = 0.0
    p1_s: float = 0.0
    p2_s: float = 0.0
    p3_s: float = 0.0
    hold_s: float = 0.0
    tokens_before: int | None = None
    tokens_after: int | None = None
    split: dict[str, float] = field(default_factory=dict)
    move: str = ""

    @property
    def pause_s(self) -> float:
        return self.p2_s - self.p3_s


def measure_tokens(data: bytes, sid: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{sid}.jsonl"
        path.write_bytes(data)
        return context_size(build(read_session(locate(path)))) or 0


def synthesize(wanted: int) -> Session:
    """The smallest session of this generator (seed 4) whose history reaches ``wanted`` tokens."""
    turns = max(1, round(wanted / TOKENS_PER_TURN))
    while True:
        synth = Synth(SEED)
        synth.session(turns)
        data = b"".join(synth.lines)
        tokens = measure_tokens(data, synth.sid)
        if tokens >= wanted * 0.95 or turns > 2000:
            return Session(wanted, turns, synth.sid, data, tokens)
        turns += max(1, round((wanted - tokens) / TOKENS_PER_TURN))


def install(rig: Rig, session: Session) -> None:
    """A fresh copy of the session in the rig's Claude project folder, with the rig's cwd."""
    project = rig.home.claude_config / "projects" / encode_cwd(rig.home.project)
    project.mkdir(parents=True, exist_ok=True)
    data = session.data.replace(f'"cwd":"{CWD}"'.encode(),
                                b'"cwd":' + json.dumps(str(rig.home.project)).encode())
    (project / f"{session.sid}.jsonl").write_bytes(data)


@dataclass
class Probe:
    reported: int  # tokens the agent reports for the session (the fake server's count)
    new_s: float  # session/new on the adapter alone
    resume_s: float  # session/resume of the session on the adapter alone
    first_s: float  # the first prompt after that resume
    second_s: float  # the next prompt


def probe(adapter_name: str, session: Session, root: Path) -> Probe:
    """The adapter alone, no liminal: what a resume of this session costs in the adapter and CLI,
    and the context the agent will report for it. The fake server counts a token per 4 bytes of
    the whole request (system prompt and tools included), the generator's usage 3.4 characters
    of history per token plus 18k, so the two disagree; the trigger is set on the agent's figure."""
    rig = Rig.start(adapters()[adapter_name], root, Scenario())
    assert isinstance(rig.server, FakeAnthropic)
    rig.server.strict = False
    try:
        install(rig, session)
        with rig.client(via_liminal=False) as client:
            client.initialize()
            t = time.monotonic()
            client.new_session(rig.home.project)
            new_s = time.monotonic() - t
            t = time.monotonic()
            client.request("session/resume", {"sessionId": session.sid, "cwd": str(rig.home.project),
                                              "mcpServers": []}, timeout=600)
            resume_s = time.monotonic() - t
            first_s = timed_prompt(client, session.sid, "bench: how big is this")
            second_s = timed_prompt(client, session.sid, "bench: and now")
        reported = tokens(len(rig.server.messages_requests()[-2].raw))
        return Probe(reported, new_s, resume_s, first_s, second_s)
    finally:
        rig.stop()
        shutil.rmtree(root, ignore_errors=True)


def configure(rig: Rig, session: Session, reported: int) -> tuple[int, int]:
    # Just below what the agent reports after the first prompt, so its end triggers the swap.
    high, target = int(reported * 0.9), int(reported * 0.6)
    # The gradient's default bands (40k recent, 40k middle) are larger than the small sessions'
    # targets; scale them down there so the rewrite lands below the trigger.
    band = min(40_000, target // 3)
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {high}\ntarget_tokens = {target}\nhold_timeout_seconds = 120\n"
        f"[gradient]\nrecent_tokens = {band}\nmiddle_tokens = {band}\n"
    )
    return high, target


def timed_prompt(client: AcpClient, thread: str, text: str) -> float:
    t = time.monotonic()
    result = client.prompt(thread, text, timeout=600)
    elapsed = time.monotonic() - t
    if result.stop_reason != "end_turn":
        raise RuntimeError(f"prompt {text!r} ended with {result.stop_reason}")
    return elapsed


def swap_log(path: Path) -> dict[str, Any]:
    """The timing fields of liminal's ``swap committed`` log line, and how it moved."""
    found: dict[str, Any] = {}
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "swap committed":
            found.update({k: entry[k] for k in ("settle_s", "decide_s", "rewrite_s", "move_s")
                          if k in entry})
            found["move"] = entry.get("moved_by", "")
    return found


def one_run(adapter_name: str, session: Session, reported: int, root: Path) -> Run:
    adapter = adapters()[adapter_name]
    rig = Rig.start(adapter, root, Scenario())
    rig.server.strict = False  # the synthetic signatures are not signed with its key
    run = Run(adapter_name, session.wanted)
    try:
        install(rig, session)
        configure(rig, session, reported)
        stderr = rig.home.logs / "stderr-liminal.log"
        client = AcpClient(rig.home.liminal_argv(),
                           {**rig.home.env(), "LIMINAL_LOG_LEVEL": "debug"},
                           rig.home.project, stderr)
        rig.clients.append(client)
        with client:
            client.initialize()
            t = time.monotonic()
            client.load_session(session.sid, rig.home.project, timeout=600)
            run.load_s = time.monotonic() - t
            run.p1_s = timed_prompt(client, session.sid, "bench: first question after loading")
            run.p2_s = timed_prompt(client, session.sid, "bench: the prompt that waits for the swap")
            # Not at once: with the older adapter every turn end holds the thread while liminal
            # reads the context size from the file, and the baseline must not wait for that.
            time.sleep(1.0)
            run.p3_s = timed_prompt(client, session.sid, "bench: a prompt with no swap")
        records = SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()
        if records:
            first = records[0]
            run.outcome = first.outcome + ("" if len(records) == 1 else f" (+{len(records) - 1})")
            run.hold_s = first.duration_s
            run.tokens_before, run.tokens_after = first.tokens_before, first.tokens_after
        else:
            run.outcome = "none"
        logged = swap_log(stderr)
        run.move = str(logged.pop("move", ""))
        run.split = {k: float(v) for k, v in logged.items()}
    finally:
        rig.stop()
    return run


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt_s(values: list[float]) -> str:
    return f"{p50(values):.3f} / {max(values):.3f}" if values else "-"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="50000,150000,400000,1000000",
                    help="history sizes in tokens, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--adapters", default="claude-zed,claude-agent")
    ap.add_argument("--keep", action="store_true", help="keep every run's world (else only failed ones)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "swap")
    ap.add_argument("--smoke", action="store_true",
                    help="one small session, once, claude-agent, in a temporary folder: does it still "
                         "run (skips, exit 77, without the harness)")
    a = ap.parse_args()
    if a.smoke:
        # The smallest size whose rewrite lands well below its trigger: in a 20k session the CLI's
        # own prompt (12k) and the last turn, kept whole, are the whole floor, so the swap is
        # skipped as one that would only come again (issue 20's rule) and nothing is measured.
        a.sizes, a.repeat, a.adapters = "50000", 1, "claude-agent"
        a.out = Path(tempfile.mkdtemp(prefix="liminal-swap-smoke-"))
    names = [n for n in a.adapters.split(",") if n]
    for name in names:
        reason = adapters()[name].missing_reason()
        if reason:
            print(f"{name}: {reason} (export LIMINAL_HARNESS_DIR?)", file=sys.stderr)
            return SKIPPED if a.smoke else 1

    sessions = []
    for wanted in (int(s) for s in a.sizes.split(",")):
        t = time.perf_counter()
        s = synthesize(wanted)
        sessions.append(s)
        print(f"session ~{wanted:,}: {s.turns} turns, {len(s.data) / 1e6:.1f} MB, "
              f"{s.tokens:,} tokens (liminal's estimate), made in {time.perf_counter() - t:.1f} s",
              flush=True)

    shutil.rmtree(a.out, ignore_errors=True)
    a.out.mkdir(parents=True)
    reported: dict[tuple[str, int], int] = {}
    probes: dict[tuple[str, int], list[Probe]] = {}
    for n in range(a.repeat):
        for session in sessions:
            for name in names:
                got = probe(name, session, a.out / "probe")
                probes.setdefault((name, session.wanted), []).append(got)
                reported[name, session.wanted] = got.reported
                print(f"{name:13} {session.tokens:>9,} adapter alone #{n}: reports {got.reported:,} "
                      f"tokens; session/new {got.new_s:.3f} s, session/resume {got.resume_s:.3f} s, "
                      f"first prompt {got.first_s:.3f} s, next {got.second_s:.3f} s", flush=True)
    runs: list[Run] = []
    for n in range(a.repeat):  # interleaved, so a noisy neighbour hurts every case alike
        for session in sessions:
            for name in names:
                run = one_run(name, session, reported[name, session.wanted], a.out / f"{name}-{session.wanted}-{n}")
                runs.append(run)
                split = " ".join(f"{k[:-2]}={v:.3f}" for k, v in run.split.items())
                print(f"{name:13} {session.tokens:>9,} #{n}: {run.outcome:10} load {run.load_s:.2f} "
                      f"p1 {run.p1_s:.3f} p2 {run.p2_s:.3f} p3 {run.p3_s:.3f} pause {run.pause_s:.3f} "
                      f"hold {run.hold_s:.3f} [{split}] via {run.move or '?'} "
                      f"tokens {run.tokens_before} -> {run.tokens_after}", flush=True)
                if run.outcome == "committed" and not a.keep:
                    shutil.rmtree(a.out / f"{name}-{session.wanted}-{n}", ignore_errors=True)

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"\nmachine: nproc {os.cpu_count()}, {cpu}; Python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          "fake model server strict = False")
    print(f"\nseconds, p50 / max of {a.repeat} runs; pause = prompt 2 latency - prompt 3 latency\n")
    print("| adapter | history (tokens) | agent reports | committed | pause | hold (`duration_s`) | settle | decide "
          "| rewrite | move | baseline prompt | tokens after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        for session in sessions:
            mine = [r for r in runs if r.adapter == name and r.size == session.wanted]
            ok = [r for r in mine if r.outcome == "committed"]
            parts = {k: [r.split[k] for r in ok if k in r.split]
                     for k in ("settle_s", "decide_s", "rewrite_s", "move_s")}
            after = [r.tokens_after for r in ok if r.tokens_after]
            print(f"| {name} | {session.tokens:,} | {reported[name, session.wanted]:,} | {len(ok)}/{len(mine)} "
                  f"| {fmt_s([r.pause_s for r in ok])} | {fmt_s([r.hold_s for r in ok])} "
                  f"| {fmt_s(parts['settle_s'])} | {fmt_s(parts['decide_s'])} "
                  f"| {fmt_s(parts['rewrite_s'])} | {fmt_s(parts['move_s'])} "
                  f"| {fmt_s([r.p3_s for r in ok])} | {f'{int(p50([float(x) for x in after])):,}' if after else '-'} |")
    print("\nthe adapter alone (no liminal), seconds, p50 / max\n")
    print("| adapter | history (tokens) | session/new | session/resume | first prompt after it | next prompt |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        for session in sessions:
            probed = probes[name, session.wanted]
            print(f"| {name} | {session.tokens:,} | {fmt_s([g.new_s for g in probed])} "
                  f"| {fmt_s([g.resume_s for g in probed])} | {fmt_s([g.first_s for g in probed])} "
                  f"| {fmt_s([g.second_s for g in probed])} |")
    print("\ngrowth (least squares over the sizes, p50s): seconds per 100k tokens of history")
    for name in names:
        xs, pause, hold = [], [], []
        for session in sessions:
            ok = [r for r in runs if r.adapter == name and r.size == session.wanted
                  and r.outcome == "committed"]
            if ok:
                xs.append(session.tokens / 100_000)
                pause.append(p50([r.pause_s for r in ok]))
                hold.append(p50([r.hold_s for r in ok]))
        if len(xs) >= 2:
            print(f"  {name}: pause {statistics.linear_regression(xs, pause).slope:+.3f} s, "
                  f"hold {statistics.linear_regression(xs, hold).slope:+.3f} s")
    if a.smoke:
        shutil.rmtree(a.out, ignore_errors=True)
        return 0 if all(r.outcome == "committed" for r in runs) else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
