"""Each pinned adapter, through ``liminal acp`` and directly: same behaviour, same bytes.

The two runs of a module-scoped pair are shared by the tests below, so each adapter costs two
scenario runs however many aspects are asserted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from fixtures.harness import Rig, adapters, first_difference, normalize
from fixtures.harness.transcript import settled_tool_calls, split_floating
from tests.acceptance.conftest import ADAPTER_NAMES, require
from tests.acceptance.scenario import PERMITTED_FILE, Run, model_script, run_scenario
from tests.support.commands import (
    offers_liminal_commands,
    without_liminal_commands,
    without_liminal_ids,
)


@dataclass
class Pair:
    direct: Run
    liminal: Run


@pytest.fixture(scope="module", params=ADAPTER_NAMES)
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    adapter = require(adapters()[request.param])
    # Equal-length roots: paths end up in prompts, and usage numbers follow prompt size.
    rigs = [Rig.start(adapter, tmp_path_factory.mktemp(f"{adapter.name}-{side}"),
                      model_script(adapter)) for side in ("d", "l")]
    try:
        direct = run_scenario(rigs[0], via_liminal=False)
        through = run_scenario(rigs[1], via_liminal=True)
        yield Pair(direct, through)
    finally:
        for rig in rigs:
            rig.stop()


def runs(pair: Pair) -> list[Run]:
    return [pair.direct, pair.liminal]


def test_initialize_advertises_load_session(pair: Pair) -> None:
    for run in runs(pair):
        capabilities = run.initialize["agentCapabilities"]
        assert isinstance(capabilities, dict) and capabilities.get("loadSession") is True
        assert run.session_id


def test_text_prompt(pair: Pair) -> None:
    for run in runs(pair):
        assert run.text is not None and run.text.stop_reason == "end_turn"
        # Codex puts a model warning before the reply on some versions; the reply ends the text.
        assert re.search(r"pong \(n=\d+\)$", run.text.text), run.text.text


def test_tool_prompt_runs_the_tool(pair: Pair) -> None:
    for run in runs(pair):
        assert run.tool is not None and run.tool.stop_reason == "end_turn"
        assert "tool_call" in run.tool.kinds() and "tool_call_update" in run.tool.kinds()
        assert run.tool.text.endswith("the tool ran")
        requests = run.rig.server.requests
        assert any("hi" in r.raw.decode(errors="replace") and b"echo hi" in r.raw for r in requests)


def test_permission_is_asked_and_approved(pair: Pair) -> None:
    for run in runs(pair):
        assert run.permission is not None and run.permission.stop_reason == "end_turn"
        assert run.permission_requests == 1
        assert (run.rig.home.project / PERMITTED_FILE).exists()
        assert run.permission.text.endswith("the file exists")


def test_load_replays_the_history(pair: Pair) -> None:
    for run in runs(pair):
        kinds = [u["update"]["sessionUpdate"] for u in run.replay]  # type: ignore[index]
        assert kinds.count("user_message_chunk") >= 3, kinds
        assert "tool_call" in kinds
        replayed = b"".join(run.frames[1])
        assert b"hello" in replayed and b"USE_PERMISSION" in replayed


def test_the_fake_model_refused_nothing(pair: Pair) -> None:
    for run in runs(pair):
        assert [r.error for r in run.rig.server.errors] == []


def test_frames_through_liminal_equal_frames_direct(pair: Pair) -> None:
    """The live session compared across the two worlds; the load on one and the same file. The
    agent's command lists reach the client with liminal's commands added: compared without."""
    direct = [[without_liminal_commands(f) for f in frames] for frames in pair.direct.normalized()]
    lists = [f for frames in pair.liminal.frames for f in frames if b'"available_commands_update"' in f]
    assert lists and all(offers_liminal_commands(f) for f in lists)
    # Through liminal, frames also carry its message ids and rewind capability (issue 25).
    through = [[without_liminal_ids(without_liminal_commands(f)) for f in frames]
               for frames in pair.liminal.normalized()]
    paths = [str(pair.liminal.rig.home.root)]
    direct[1] = [without_liminal_commands(f) for f in normalize(pair.liminal.same_file_direct_load, paths)]
    worlds = f"(worlds: {pair.direct.rig.home.root} and {pair.liminal.rig.home.root})"
    for process, (left, right) in enumerate(zip(direct, through, strict=True)):
        (left_ordered, left_floating), (right_ordered, right_floating) = (
            split_floating(left), split_floating(right))
        # Byte for byte; where the adapter split a tool call's updates differently in the two
        # runs (timing: ``settled_tool_calls``), what each call ends as.
        difference = first_difference(left_ordered, right_ordered) and first_difference(
            settled_tool_calls(left_ordered), settled_tool_calls(right_ordered))
        assert difference is None, f"process {process}: {difference}\n{worlds}"
        difference = first_difference(left_floating, right_floating)
        assert difference is None, (
            f"process {process}, floating notifications: {difference}\n{worlds}")
