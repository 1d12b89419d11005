"""Recall keys outlive the CLI's files (issue 20), with the real Claude Code and Codex.

A conversation of 25 turns, each reading a different tool output (some run a command too long to
keep whole), goes through ``liminal acp`` with a low threshold: several swaps, each rewrite made
from the one before, so the markers in the thread's current session name the original session,
rewrites, and records a rewrite copied from an older file. Then every session file but the one
the thread is on is deleted (the CLI's ``cleanupPeriodDays``, or a person), the recall cache is
emptied, and a new liminal loads the thread: the model calls liminal's ``recall`` tool for every
key in its context, and each answer must be, byte for byte, what the key named while the files
were all there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio

from fixtures.harness import (
    AcpClient,
    Adapter,
    ModelRequest,
    Reply,
    Rig,
    Scenario,
    Shell,
    Text,
    ToolCall,
)
from liminal.config import GradientSettings
from liminal.gradient.recall import KEY_IN_MARKER, RecallKey
from liminal.harness.base import HarnessChoice
from liminal.harness.known import find_session_file, known_harnesses
from liminal.ingest import rewrites
from liminal.kernel.journal import SwapJournal
from liminal.store.sqlite import SqliteStore
from tests.acceptance.conftest import adapter_fixture

adapter = adapter_fixture(["claude-agent", "codex-zed", "codex-agent"])
TURNS = 25
# A command too long to keep whole: the middle band cuts its input too (a key with a path).
LONG = "x" * 400


def command(n: int) -> str:
    start = 10_000 + 1_000 * n
    if n % 4 == 3:
        return f"echo {LONG}{n} | wc -c; seq {start} {start + 300}"
    return f"seq {start} {start + 400}"


def scenario() -> Scenario:
    script = Scenario()
    for n in range(TURNS):
        script.add(f"step{n:02d}", Shell(command(n), f"Read part {n}"), f"read part {n}")
    return script


def keys_in(text: str) -> list[str]:
    return list(dict.fromkeys(KEY_IN_MARKER.findall(text)))


def recall_every_key(request: ModelRequest) -> Reply | Text:
    keys = keys_in(json.dumps(request.body))
    if not keys:
        return Text("NO RECALL KEY")
    return Reply(tuple(ToolCall("mcp__liminal__recall", {"key": key}) for key in keys))


def copied_by_liminal(text: str, files: dict[str, Path | None], notes: Path) -> bool:
    """The key names a session liminal wrote and a record in the bytes liminal wrote there."""
    key = RecallKey.parse(text)
    path = files.get(key.session_id)
    own = rewrites.own_bytes(notes, key.session_id)
    return path is not None and own > 0 and f'"{key.uuid}"'.encode() in path.read_bytes()[:own]


def configure(rig: Rig, high: int, target: int) -> None:
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {high}\ntarget_tokens = {target}\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 4000\nsummary_tokens = 600\n")


def liminal_client(rig: Rig) -> AcpClient:
    n = len(rig.clients)
    client = AcpClient(rig.home.liminal_argv(), rig.home.env(), rig.home.project,
                       rig.home.logs / f"stderr-{n}-liminal.log")
    rig.clients.append(client)
    return client


def said(client: AcpClient, thread: str, text: str) -> str:
    result = client.prompt(thread, text, timeout=180)
    assert result.stop_reason == "end_turn", text
    return result.text


def session_files(rig: Rig) -> list[Path]:
    if rig.adapter.model_api == "anthropic":
        return sorted(rig.home.claude_config.glob("projects/*/*.jsonl"))
    return sorted(rig.home.codex_home.glob("sessions/*/*/*/rollout-*.jsonl"))


def calls_and_answers(request: ModelRequest) -> dict[str, tuple[str, str, bool]]:
    """Every recall call the request shows answered: call id -> (key, answer text, is error)."""
    body = request.body
    keys: dict[str, str] = {}
    if request.api == "anthropic":
        for message in body.get("messages", []):
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if block.get("type") == "tool_use" and "recall" in str(block.get("name")):
                    keys[block["id"]] = block["input"]["key"]
    else:
        for item in body.get("input", []):
            if item.get("type") == "function_call" and "recall" in str(item.get("name")):
                keys[item["call_id"]] = json.loads(item["arguments"])["key"]
    answers = {}
    for result in request.tool_results:
        if result.call_id in keys:
            answers[result.call_id] = (keys[result.call_id], mcp_text(result.text), result.is_error)
    return answers


def mcp_text(text: str) -> str:
    """Codex puts its timing before an MCP tool's answer ("Wall time: ... Output:"), and 0.137
    the answer's content blocks as JSON after it (``test_model_tools.tool_answer``)."""
    head, found, rest = text.partition("Output:")
    if found and head.startswith("Wall time"):
        rest = rest.lstrip("\n")
        try:
            blocks = json.loads(rest)
            return "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        except ValueError:
            return rest
    return text


async def listed_once(rig: Rig, thread: str) -> None:
    store = await SqliteStore.open(rig.home.liminal_home / "liminal.db", create=False)
    try:
        assert [s.thread.id for s in await store.threads()] == [thread]
    finally:
        await store.aclose()


def test_every_key_in_the_current_session_resolves_with_only_its_file_left(
        adapter: Adapter, rig: Rig) -> None:
    rig.server.script = scenario()
    base = rig.overhead()
    rig.server.script = scenario()
    configure(rig, base + 7_000, base + 4_000)
    with liminal_client(rig) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        for n in range(TURNS):
            said(client, thread, f"step{n:02d} please")
            # The thread also moves onto cuts: /undo, and /clear back to a mark.
            if n == 10:
                assert "out of the model's context" in said(client, thread, "/undo")
            elif n == 14:
                said(client, thread, "/mark M")
            elif n == 17:
                assert "cleared back to mark M" in said(client, thread, "/clear M")
    # One thread in the store, listed once: the sessions the thread left, which liminal wrote
    # and closed, are no threads of their own.
    anyio.run(listed_once, rig, thread)
    journal = SwapJournal(rig.home.liminal_home / "swaps.jsonl")
    current, lineage = journal.current(thread)
    assert current is not None and len(lineage) >= 4, (lineage, rig.stderr_tail())
    env = rig.home.env()
    path = find_session_file(current, str(rig.home.project), env)
    assert path is not None
    keys = keys_in(path.read_text())
    # What each key names, read from the files while they are all there.
    harness = HarnessChoice(known_harnesses(GradientSettings(), env)).harness
    expected = {key: harness.recall(RecallKey.parse(key)) for key in keys}
    assert all(value is not None for value in expected.values()), expected
    # Keys that name a session liminal wrote and a record it copied there, not only records the
    # CLI appended (those the store had before issue 20).
    notes = rig.home.liminal_home / "rewrites.jsonl"
    files = {backing: find_session_file(backing, str(rig.home.project), env) for backing in lineage}
    assert [key for key in keys if copied_by_liminal(key, files, notes)], (keys, lineage)

    # The CLI cleans up (or a person does): only the thread's current file is left; and the
    # recall cache is empty, so every answer comes from the store.
    for other in session_files(rig):
        if other != path:
            other.unlink()
            shutil.rmtree(other.with_suffix(""), ignore_errors=True)
    shutil.rmtree(rig.home.liminal_home / "cache", ignore_errors=True)
    notes.unlink()  # nor is how much liminal wrote in its files needed any more
    configure(rig, 10_000_000, base + 2_500)  # no swap while the model recalls

    rig.server.script = Scenario().add("RECALL", recall_every_key, "recalled")
    with liminal_client(rig) as client:
        client.initialize()
        client.load_session(thread, rig.home.project, timeout=120)
        said(client, thread, "RECALL every key")
    views = rig.server.views()
    asked = next(v for v in reversed(views) if "RECALL" in v.last_user_text and not v.tool_results)
    assert set(keys) <= set(keys_in(json.dumps(asked.body))), "every key of the file is in the context"
    answers = calls_and_answers(views[-1])
    assert {key for key, _, _ in answers.values()} >= set(keys)
    wrong = {key: text[:200] for key, text, failed in answers.values()
             if key in expected and (failed or text.encode() != expected[key])}
    assert not wrong, (len(wrong), len(keys), wrong)
