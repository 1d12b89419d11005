"""A client that starts liminal for every prompt, with the real Claude Code and Codex: the store
after N turns in N processes (each ``session/load``s the thread, whose whole history the agent
replays, then ``session/prompt``s) holds each turn once, as after the same turns in one process
(another home, the same scripted model), within the bound ``tests.support.storesize`` states,
and a hundredth of the one-process figure for what differs between two runs of a real CLI (its
usage figures). Before, each load stored the whole history again, as frames and as messages.
"""

from __future__ import annotations

from fixtures.harness import Adapter, Rig, Scenario, Shell
from tests.acceptance.conftest import adapter_fixture
from tests.support.acp_thread import liminal, liminal_client, said
from tests.support.storesize import measure

adapter = adapter_fixture(["claude-agent", "codex-agent"])
TURNS = 5


def scenario() -> Scenario:
    script = Scenario()
    for n in range(TURNS):
        script.add(f"step{n}", Shell(f"seq {10_000 * (n + 1)} {10_000 * (n + 1) + 300}",
                                     f"Read part {n}"), f"read part {n} of the notes")
    return script


def prompt(n: int) -> str:
    return f"step{n} please"


def test_a_process_per_prompt_stores_each_turn_once(adapter: Adapter, rig: Rig, make_rig: object) -> None:
    alone, each = rig, make_rig(adapter.name)  # type: ignore[operator]
    alone.server.script, each.server.script = scenario(), scenario()
    with liminal_client(alone) as client:
        client.initialize()
        thread_alone = client.new_session(alone.home.project)["sessionId"]
        for n in range(TURNS):
            said(client, thread_alone, prompt(n))
    thread: str | None = None
    for n in range(TURNS):
        with liminal_client(each) as client:
            client.initialize()
            if thread is None:
                thread = str(client.new_session(each.home.project)["sessionId"])
            else:  # the agent replays every turn so far
                replayed = str(client.load_session(thread, each.home.project))
                assert all(prompt(k) in replayed for k in range(n)), replayed[-2000:]
            said(client, thread, prompt(n))
    assert thread is not None

    one = measure(alone.home.liminal_home / "liminal.db")
    per_prompt = measure(each.home.liminal_home / "liminal.db")
    assert (per_prompt.replayed, per_prompt.replayed_messages) == (0, 0)  # no piece of a replay stored
    # (tests.support.storesize), with a hundredth of the one-process figure for what differs
    # between two runs of a real CLI (its usage figures).
    assert per_prompt.stored <= one.stored * 1.01 + per_prompt.state + per_prompt.note, (per_prompt, one)
    shown = liminal(each, "history", thread)
    for n in range(TURNS):
        assert shown.count(f"> {prompt(n)}\n") == 1, shown
    assert "(0 repeated)" in liminal(each, "doctor")
