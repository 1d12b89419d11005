"""``python -m fixtures.harness.demo``, the model a person tries liminal with (README, "Try it
without an editor"): it serves until stopped, and what it writes points Claude Code at it and
gives liminal a private config that swaps early."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from urllib.request import Request, urlopen

from fixtures.harness.adapters import REPO
from liminal import config


def test_the_demo_serves_a_model_and_writes_what_points_at_it(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "fixtures.harness.demo", "--dir", str(folder)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        said = [proc.stdout.readline() for _ in range(4)]
        assert said[3].strip() == f". {folder / 'env'}", said
        env = dict(line.removeprefix("export ").split("=", 1) for line in (folder / "env").read_text().splitlines())
        env = {k: shlex.split(v)[0] for k, v in env.items()}
        assert env["LIMINAL_HOME"] == str(folder / "liminal") and env["CLAUDE_CONFIG_DIR"] == str(folder / "claude")
        request = Request(f"{env['ANTHROPIC_BASE_URL']}/v1/messages/count_tokens", method="POST",
                          data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
                          headers={"content-type": "application/json"})
        with urlopen(request, timeout=30) as answer:
            assert answer.status == 200
        made = folder / "liminal" / "config.toml"
        assert made.stat().st_mode & 0o777 == 0o600  # liminal doctor finds nothing to fix
        settings = config.load(env={"LIMINAL_HOME": env["LIMINAL_HOME"]})
        assert (settings.swap.high_tokens, settings.swap.target_tokens) == (25_000, 18_000)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_demos_summary_gives_a_lesson_of_what_the_person_asked_to_remember() -> None:
    """docs/memory.md, "Try it": the demo's side session draws a lesson from each prompt that says
    "remember", citing its turn, as liminal reads it, and keeps every note it reviews."""
    from fixtures.harness.demo import summary
    from fixtures.harness.script import ModelRequest
    from liminal.gradient.summarize import TurnDigest, parse_lessons, parse_review, summary_request

    turns = [TurnDigest(1, "remember: the release codename is PLOVER-8812", ("pong",)),
             TurnDigest(2, "BIG read please", ("read it",))]
    asked = summary_request(turns, lessons=True, review=[("lesson:0123456789", "the deploy window is Tuesday")])
    answer = summary(ModelRequest("anthropic", "/v1/messages", {}, b"", (), asked, (), 1)).text
    [lesson] = parse_lessons(answer, turns)
    assert (lesson.turn, lesson.text) == (1, "the release codename is PLOVER-8812")
    assert parse_review(answer, ["lesson:0123456789"])["lesson:0123456789"][0] is True
