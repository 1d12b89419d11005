"""A thread opens from the store alone (issue 23), with the real Claude Code and Codex.

A conversation with several swaps goes through ``liminal acp``; a second liminal loads the
thread and asks one more thing while the files are all there (what the model is sent then is
the context the thread has). Then every session file of the thread is deleted (the CLI's
clean-up after 30 days, a person: only the store is left), and so is the recall cache. A third
liminal loads the thread: it opens (the file written again from the store), the model is sent
the same context as before and the turn after it, and every recall key in that context
resolves, byte for byte what it named while the files were there.

Claude Code keeps a large tool output beside the session (``<id>/tool-results/``), the line
only a preview naming it: on claude-agent, that file comes back too, byte for byte, and the
model reads its earlier output from it again.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from typing import Any

from fixtures.harness import Adapter, ModelRequest, Rig, Scenario, Shell, ToolCall
from liminal.config import GradientSettings
from liminal.gradient.recall import RecallKey
from liminal.harness.base import HarnessChoice
from liminal.harness.known import find_session_file, known_harnesses
from liminal.kernel.journal import SwapJournal
from tests.acceptance.conftest import adapter_fixture
from tests.acceptance.test_recall import (
    calls_and_answers,
    command,
    configure,
    keys_in,
    liminal_client,
    recall_every_key,
    said,
    session_files,
)

adapter = adapter_fixture(["claude-agent", "codex-zed", "codex-agent"])
TURNS = 25


def scenario() -> Scenario:
    script = Scenario()
    for n in range(TURNS):
        script.add(f"step{n:02d}", Shell(command(n), f"Read part {n}"), f"read part {n}")
    return script.add("NEXT", "the next answer")


def texts(value: Any) -> Iterator[str]:
    """Every string of a request body's conversation, as the model is sent it."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("cache_control", "id", "call_id", "tool_use_id"):
                yield from texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)


def conversation(body: Any) -> list[str]:
    said_ = body.get("messages") if "messages" in body else body.get("input")
    return [t for t in texts(said_) if len(t) > 40]


def test_a_thread_whose_files_are_all_gone_opens_from_the_store_and_goes_on(
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
    journal = SwapJournal(rig.home.liminal_home / "swaps.jsonl")
    current, lineage = journal.current(thread)
    assert current is not None and len(lineage) >= 3, (lineage, rig.stderr_tail())
    configure(rig, 10_000_000, base + 2_500)  # no swap from here on: the same session throughout

    # The context the thread has: what the model is sent for one more turn, files all there.
    with liminal_client(rig) as client:
        client.initialize()
        client.load_session(thread, rig.home.project, timeout=120)
        said(client, thread, "NEXT please")
    before = next(v for v in reversed(rig.server.views()) if "NEXT" in v.last_user_text)
    env = rig.home.env()
    path = find_session_file(current, str(rig.home.project), env)
    assert path is not None
    keys = keys_in(path.read_text())
    assert keys
    harness = HarnessChoice(known_harnesses(GradientSettings(), env)).harness
    expected = {key: harness.recall(RecallKey.parse(key)) for key in keys}
    file_before = path.read_bytes()

    for each in session_files(rig):  # every file of the thread's past: only the store is left
        each.unlink()
        shutil.rmtree(each.with_suffix(""), ignore_errors=True)
    shutil.rmtree(rig.home.liminal_home / "cache", ignore_errors=True)
    assert find_session_file(current, str(rig.home.project), env) is None

    rig.server.script = Scenario().add("RECALL", recall_every_key, "recalled")
    with liminal_client(rig) as client:
        client.initialize()
        client.load_session(thread, rig.home.project, timeout=120)
        said(client, thread, "RECALL every key")
    restored = find_session_file(current, str(rig.home.project), env)
    assert restored is not None, rig.stderr_tail()
    logs = "".join(p.read_text() for p in rig.home.logs.glob("stderr-*-liminal.log"))
    assert logs.count("session file written from the store") == 1, rig.stderr_tail()
    assert restored.read_bytes().startswith(file_before)
    assert restored.stat().st_mode & 0o777 == 0o600
    views = rig.server.views()
    asked = next(v for v in reversed(views) if "RECALL" in v.last_user_text and not v.tool_results)
    # The same context as before the files went, then the turn it had and the new prompt.
    now = conversation(asked.body)
    missing = [t[:120] for t in conversation(before.body) if t not in now]
    assert not missing, (len(missing), missing[:5])
    assert "the next answer" in json.dumps(asked.body)
    # Every recall key in that context resolves, byte for byte.
    assert set(keys) <= set(keys_in(json.dumps(asked.body)))
    answers = calls_and_answers(views[-1])
    assert {key for key, _, _ in answers.values()} >= set(keys)
    wrong = {key: text[:200] for key, text, failed in answers.values()
             if key in expected and (failed or text.encode() != expected[key])}
    assert not wrong, (len(wrong), len(keys), wrong)


def saved_path(request: ModelRequest) -> str:
    """The file a ``<persisted-output>`` preview the model was sent names."""
    return json.dumps(request.body).split("Full output saved to: ")[1].split("\\n")[0]


def test_a_large_tool_output_comes_back_with_its_thread(make_rig: Callable[..., Rig]) -> None:
    """Claude Code (2.1.316) puts a tool output past about 30,000 characters in
    ``<id>/tool-results/``; every file of the thread deleted, the load writes it back from the
    store with the session, and the model reads its own earlier output from it again."""
    rig = make_rig("claude-agent")
    rig.server.script = (Scenario()
                         .add("BIG", Shell("seq 1 8000", "Print many numbers"), "printed")
                         .add("READ", lambda r: ToolCall("Read", {"file_path": saved_path(r)}),
                              "read it again"))
    with liminal_client(rig) as client:
        client.initialize()
        thread = client.new_session(rig.home.project)["sessionId"]
        said(client, thread, "BIG please")
    before = rig.server.views()[-1]  # the turn's last request: the preview, as the model saw it
    kept = sorted(rig.home.claude_config.glob(f"projects/*/{thread}/tool-results/*"))
    assert len(kept) == 1, sorted(rig.home.claude_config.rglob("*"))
    output = kept[0].read_bytes()
    assert len(output) > 30_000 and str(kept[0]) == saved_path(before)

    for each in session_files(rig):  # every file of the thread: only the store is left
        each.unlink()
        shutil.rmtree(each.with_suffix(""), ignore_errors=True)
    assert not kept[0].exists()

    with liminal_client(rig) as client:
        client.initialize()
        client.load_session(thread, rig.home.project, timeout=120)
        said(client, thread, "READ it again")
    assert kept[0].read_bytes() == output, rig.stderr_tail()
    assert kept[0].stat().st_mode & 0o777 == 0o600
    views = rig.server.views()
    asked = next(v for v in views if "READ" in v.last_user_text and not v.tool_results)
    now = conversation(asked.body)
    missing = [t[:120] for t in conversation(before.body) if t not in now]
    assert not missing, missing
    [read] = views[-1].tool_results  # the model's Read of the file its preview names
    assert not read.is_error and "7999" in read.text and "8000" in read.text, read.text[:300]
