"""A component that fails never takes the proxy down (``liminal.supervise``).

Each test puts a failing component beside a real proxy and the scripted agent, and checks that
the conversation goes on: every prompt is answered, nothing stays held.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from liminal import supervise
from liminal.acp.port import Component, Frames
from liminal.kernel.journal import SwapJournal
from liminal.kernel.swap import SwapManager
from liminal.serve.locks import LockRelease
from liminal.transport.legs import AgentLeg
from tests.integration.test_swap_scripted import FakeHarness, settings, start
from tests.support.inproc import proxy_in_process
from tests.support.proxy_process import scripted_agent_argv

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def quick_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervise, "RESTART_PAUSE_SECONDS", (0.0, 0.0, 0.0))


class Crashing(Component):
    """A component whose run fails every time, after holding the thread it was told about."""

    def __init__(self) -> None:
        self.runs = 0
        self.thread: str | None = None
        self.started = anyio.Event()
        self.go = anyio.Event()

    async def run(self, proxy: Any) -> None:
        self.runs += 1
        self.started.set()
        await self.go.wait()
        if self.thread is not None and self.runs == 1:
            proxy.hold(self.thread)  # the port it is given
        raise RuntimeError("a bug in a component")


async def test_a_component_whose_run_fails_is_restarted_then_switched_off(tmp_path: Path) -> None:
    crashing = Crashing()
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [crashing]) as (proxy, client):
        thread = await start(client)
        crashing.go.set()
        member = proxy.supervisor.members[0]
        with anyio.fail_after(20):
            while not member.off:  # noqa: ASYNC110 - supervisor state, no event
                await anyio.sleep(0.01)
        assert crashing.runs == supervise.RESTARTS + 1
        answer = await client.prompt(thread, "chunks:2")
        assert answer["result"]["stopReason"] == "end_turn"


async def test_a_hold_left_by_a_failed_component_is_released(tmp_path: Path) -> None:
    crashing = Crashing()
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [crashing]) as (proxy, client):
        thread = await start(client)
        crashing.thread = thread
        async with anyio.create_task_group() as tg:
            answers: list[dict[str, Any]] = []

            async def prompt() -> None:
                answers.append(await client.prompt(thread, "chunks:1"))

            proxy.router.hold(thread)  # as the component would, before the prompt arrives
            tg.start_soon(prompt)
            with anyio.fail_after(10):
                while proxy.router.held_count(thread) == 0:  # noqa: ASYNC110 - router state
                    await anyio.sleep(0.01)
            crashing.go.set()
        assert answers[0]["result"]["stopReason"] == "end_turn"
        assert not proxy.router.is_held(thread)


class BadTap(Component):
    frames = Frames.ALL

    def __init__(self) -> None:
        self.offers = 0

    def offer(self, event: Any) -> None:
        self.offers += 1
        raise ValueError("cannot take this frame")


async def test_a_component_whose_offer_keeps_failing_is_switched_off(tmp_path: Path) -> None:
    tap = BadTap()
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [tap]) as (proxy, client):
        thread = await start(client)
        for _ in range(3):
            answer = await client.prompt(thread, "chunks:5")
            assert answer["result"]["stopReason"] == "end_turn"
        assert proxy.supervisor.members[0].off
        assert tap.offers == supervise.OFFER_FAILURES


class BrokenJournal(SwapJournal):
    def append(self, record: Any) -> None:
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize("broken", ["unreadable at start", "unwritable during swaps"])
async def test_a_swap_manager_whose_journal_fails_does_not_stop_the_proxy(
    tmp_path: Path, broken: str
) -> None:
    journal_path = tmp_path / "swaps.jsonl"
    if broken == "unreadable at start":
        journal_path.mkdir()  # every read and append fails: IsADirectoryError
        journal = SwapJournal(journal_path)
    else:
        journal = BrokenJournal(journal_path)
    manager = SwapManager(settings(), journal, FakeHarness(tmp_path))
    async with proxy_in_process(scripted_agent_argv(), tmp_path, [manager]) as (proxy, client):
        thread = await start(client)
        for _ in range(3):  # each past the trigger: a swap is tried at every turn end
            answer = await client.prompt(thread, "used:130000 chunks:1")
            assert answer["result"]["stopReason"] == "end_turn"
        answer = await client.prompt(thread, "chunks:1")
        assert answer["result"]["stopReason"] == "end_turn"
        with anyio.fail_after(10):  # started again, it may be trying (and failing) a swap
            while proxy.router.held_threads():  # noqa: ASYNC110
                await anyio.sleep(0.01)


class Counting(Component):
    """A component with a run (the supervisor gives it a cancel scope) and an offer."""

    frames = Frames.ALL

    def __init__(self) -> None:
        self.offered = 0

    def offer(self, event: Any) -> None:
        self.offered += 1

    async def run(self, proxy: Any) -> None:
        await anyio.sleep_forever()


def test_a_proxy_with_components_is_built_before_any_event_loop(tmp_path: Path) -> None:
    """``anyio.run(Proxy(...).run)``, the public API as bench/proxy_throughput.py uses it: the
    supervisor made each component's cancel scope in its constructor, which needs a running
    loop (anyio's NoEventLoopError), so the bench's ``liminal`` case died before its first frame."""
    from liminal import config
    from liminal.proxy import Proxy

    counting = Counting()
    proxy = Proxy(["true"], config.load({}, env={"LIMINAL_HOME": str(tmp_path)}).proxy,
                  components=[counting])
    assert proxy.supervisor.members[0].scope is None  # made when the run starts


def test_a_component_that_skips_notifications_is_offered_everything_else_in_order() -> None:
    from liminal.acp.events import Direction, Kind, make_event

    def event(kind: Kind, n: int) -> Any:
        return make_event(Direction.AGENT_TO_CLIENT, kind, 1.0, b"{}", {}, "c", None, None, "m", n, 2)

    class Every(Component):
        frames = Frames.ALL

        def __init__(self) -> None:
            self.seen: list[int] = []

        def offer(self, e: Any) -> None:
            self.seen.append(e.rpc_id)

    class AnswersOnly(Every):
        frames = Frames.NO_NOTIFICATIONS

    every, answers = Every(), AnswersOnly()
    supervisor = supervise.Supervisor([every, answers], release_holds=lambda: None)
    supervisor.offer([event(Kind.NOTIFICATION, 1), event(Kind.RESPONSE, 2), event(Kind.NOTIFICATION, 3),
                      event(Kind.REQUEST, 4)])
    assert every.seen == [1, 2, 3, 4] and answers.seen == [2, 4]


async def test_serves_thread_locks_end_after_the_agent_processes_being_stopped(tmp_path: Path) -> None:
    """``liminal serve``'s thread locks keep a second agent off the CLI's files: they are
    released (``LockRelease``, a component) only once the processes the proxy was stopping (the
    one a recycle left) have exited. They had been released by a callback that ran before the
    proxy waited for those: an agent process still exiting, its thread free to another."""
    exited: list[bool] = []
    leaving = AgentLeg(["sh", "-c", "trap '' TERM; cat >/dev/null; sleep 1"])

    class Locks:
        async def release_all(self) -> None:
            exited.append(leaving.exited.is_set())

    async with proxy_in_process(scripted_agent_argv(), tmp_path, [LockRelease(Locks())]) as (proxy, client):
        await start(client)
        await leaving.open(lambda data: None, lambda: None, lambda pause: None)
        proxy.stop_soon(leaving)  # exits a second after its input closes
    assert exited == [True]
