"""Two sidecars on one thread: nothing either answered is lost, the lineage never forks.

Sidecars A and B are two ``liminal acp`` with their own HOME and ``$LIMINAL_HOME`` (as two
machines would be) recording into one store (one SQLite file) and sharing one Redis. A opens a
thread; B's load of it while A has it open is refused, saying why (on main it was answered, and
the two then moved the thread from one session: the lineage forked and a third sidecar was sent
one branch). Then A and B take the thread in turn under thresholds that move it on both: every
move from where the other left it, and a third sidecar C that loads the thread afterwards sends
the model every turn A and B answered, in order. And with no move: a sidecar that loads the
thread again with its own older file of the session opens what the other added to it. And when
B's lock of the thread cannot be taken (which stops nothing) and both move it at one moment: one
move is made, the other refused, nothing lost.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from fixtures.harness import AcpClient, Adapter, Rig, Scenario, Shell
from fixtures.harness.acp_client import AcpError
from fixtures.harness.adapters import Home
from liminal.harness.known import find_session_file
from liminal.kernel.journal import SwapJournal
from tests.acceptance.conftest import adapter_fixture
from tests.acceptance.test_recall import command, said
from tests.acceptance.test_swap_kill import wait_for
from tests.acceptance.test_two_hosts import client_of, host
from tests.support.handover import handed_over
from tests.support.mongo import MONGO_SOCKET_URL, MONGO_URL, fresh_database_sync, recorded

adapter = adapter_fixture(["claude-agent", "codex-agent"])
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")
TURNS = 24


def scenario() -> Scenario:
    script = Scenario()
    for n in range(TURNS):
        script.add(f"step{n:02d}", Shell(command(n), f"Read part {n:02d}"), f"read part {n:02d}")
    return script.add("FINAL", "the final answer")


@pytest.fixture
def redis(rig: Rig) -> Iterator[str]:
    """A Redis of the test's own on a Unix socket: the sidecars run in loopback-only network
    namespaces (``fixtures/harness/sandbox.py``), where no TCP port outside is reachable, and a
    socket file is."""
    folder = rig.home.root / "redis"
    folder.mkdir(mode=0o700)
    sock = folder / "redis.sock"
    server = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", str(sock), "--unixsocketperm",
                               "700", "--save", "", "--appendonly", "no", "--dir", str(folder)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert server.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        yield f"unix://{sock}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def configure(home: Home, store: str, high: int, target: int, redis: str) -> None:
    home.liminal_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home.liminal_home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {high}\ntarget_tokens = {target}\nhold_timeout_seconds = 60\n"
        "[gradient]\nrecent_tokens = 600\nmiddle_tokens = 4000\nsummary_tokens = 600\n"
        f'[store]\nurl = "{store}"\n[cache]\nurl = "{redis}"\n')


def lineage_in_store(liminal_home: Any, thread: str) -> list[str]:
    async def read() -> list[str]:
        with anyio.fail_after(120):
            async with recorded(liminal_home) as store:
                from liminal.kernel.whereabouts import store_lineage

                return await store_lineage(store, thread)

    return anyio.run(read)


def steps_sent(rig: Rig, word: str) -> list[int]:
    """The steps whose prompts the model was sent with the last prompt saying ``word``, in order
    (each once: Codex's request may say one prompt twice where a rewrite's history meets its
    live turns)."""
    asked = next(v for v in reversed(rig.server.views()) if word in v.last_user_text)
    return list(dict.fromkeys(int(n) for n in re.findall(r"step(\d\d) please", json.dumps(asked.body))))


def moves_of(journal: SwapJournal, thread: str) -> list[tuple[str, str]]:
    return [(r.old_backing_id, r.new_backing_id or "") for r in journal.records(thread)
            if r.outcome == "committed"]


ROUNDS = ((0, 6), (6, 12), (12, 18), (18, 24))  # A, B, A, B: the steps each says


def handed_over_by(home: Home, thread: str, project: Any, prompt: str) -> None:
    """What ``home`` wrote is in the store before the other loads the thread."""
    handed_over(home.liminal_home, thread, prompt,
                lambda session: find_session_file(session, str(project), home.env()))


@pytest.fixture(params=["sqlite", pytest.param("mongodb", marks=pytest.mark.skipif(
    not (MONGO_URL and MONGO_SOCKET_URL), reason="LIMINAL_TEST_MONGO_URL and ..._SOCKET_URL are not set"))])
def store(request: pytest.FixtureRequest, rig: Rig) -> Iterator[str]:
    """The ``store.url`` the sidecars share: one SQLite file, or one MongoDB (FerretDB)."""
    if request.param == "sqlite":
        yield f"sqlite://{rig.home.root / 'shared.db'}"
    else:
        with fresh_database_sync(base=MONGO_SOCKET_URL) as url:
            yield url


def test_two_live_sidecars_on_one_thread_lose_nothing(adapter: Adapter, rig: Rig, store: str,
                                                      redis: str) -> None:
    """B's load while A has the thread open is refused, saying why (A's lock: in Redis, and
    beside a SQLite store's file); then A and B take the thread in turn, each moving it from
    where the other left it, and C is sent every turn either answered, in order."""
    if store != "sqlite" and adapter.name == "claude-agent":
        # The store's path is the same whichever CLI is behind the sidecars: the MongoDB case
        # runs on the faster of the two (Claude's takes minutes of CI's 40).
        pytest.skip("the MongoDB store's case runs on codex-agent")
    base = rig.overhead()
    rig.server.script = scenario()
    project = rig.home.project
    a, b, c = rig.home, host(rig, "b"), host(rig, "c")
    for home in (a, b):
        configure(home, store, base + 7_000, base + 4_000, redis)
    answered: list[int] = []
    with client_of(a, rig, "a1") as on_a, client_of(b, rig, "b1") as on_b:
        on_a.initialize()
        thread = on_a.new_session(project)["sessionId"]
        assert "read part 00" in said(on_a, thread, "step00 please")
        answered.append(0)
        on_b.initialize()
        with pytest.raises(AcpError, match="open in another liminal"):
            on_b.load_session(thread, project, timeout=120)  # while A is still connected
        for n in range(1, ROUNDS[0][1]):
            assert f"read part {n:02d}" in said(on_a, thread, f"step{n:02d} please")
            answered.append(n)
        handed_over_by(a, thread, project, f"step{ROUNDS[0][1] - 1:02d} please")
    for turn, (first, end) in enumerate(ROUNDS[1:], 1):
        home = b if turn % 2 else a
        with client_of(home, rig, f"{'ba'[turn % 2 == 0]}{turn}") as client:
            client.initialize()
            client.load_session(thread, project, timeout=120)
            for n in range(first, end):
                assert f"read part {n:02d}" in said(client, thread, f"step{n:02d} please")
                answered.append(n)
            handed_over_by(home, thread, project, f"step{end - 1:02d} please")

    # Every move went from where the thread was: one line of sessions, both sidecars' moves on it.
    moves = sorted(moves_of(SwapJournal(a.liminal_home / "swaps.jsonl"), thread)
                   + moves_of(SwapJournal(b.liminal_home / "swaps.jsonl"), thread))
    lineage = lineage_in_store(a.liminal_home, thread)
    assert moves_of(SwapJournal(b.liminal_home / "swaps.jsonl"), thread), (b.logs, lineage)
    froms = [old for old, _ in moves]
    assert len(froms) == len(set(froms)), ("the lineage forked", moves)
    assert [thread, *(new for _, new in sorted(moves, key=lambda m: lineage.index(m[1])))] == lineage

    # A third sidecar loads the thread: the model is sent every turn A and B answered, in order.
    configure(c, store, 10_000_000, base + 2_500, redis)
    with client_of(c, rig, "c") as on_c:
        on_c.initialize()
        on_c.load_session(thread, project, timeout=120)
        said(on_c, thread, "FINAL please")
    order = steps_sent(rig, "FINAL")
    assert order == answered, (order, moves, lineage, a.logs, b.logs)
    logs = "".join(p.read_text() for home in (a, b) for p in home.logs.glob("stderr-*-liminal.log"))
    assert "Redis does not answer" not in logs  # the locks and leases were Redis's too


def test_a_sidecar_with_an_older_file_of_the_session_opens_what_the_other_added(
        adapter: Adapter, rig: Rig, redis: str) -> None:
    """No move: A and B take the thread in turn on its one session. A's file of it is older than
    the store's when A loads it again (B's turns are in the store, not on A's disk): the load
    writes it from the store, so the model is sent B's turns too, and the store keeps one line of
    the session, not two sidecars' lines at one offset."""
    rig.server.script = scenario()
    project = rig.home.project
    store = f"sqlite://{rig.home.root / 'shared.db'}"
    a, b = rig.home, host(rig, "b")
    for home in (a, b):
        configure(home, store, 10_000_000, 5_000_000, redis)
    with client_of(a, rig, "a1") as client:
        client.initialize()
        thread = client.new_session(project)["sessionId"]
        for n in range(2):
            said(client, thread, f"step{n:02d} please")
        handed_over_by(a, thread, project, "step01 please")
    with client_of(b, rig, "b1") as client:
        client.initialize()
        client.load_session(thread, project, timeout=120)
        for n in range(2, 4):
            said(client, thread, f"step{n:02d} please")
        handed_over_by(b, thread, project, "step03 please")
    with client_of(a, rig, "a2") as client:
        client.initialize()
        client.load_session(thread, project, timeout=120)
        said(client, thread, "step04 please")
        handed_over_by(a, thread, project, "step04 please")  # the store's lines are A's file, whole
    order = steps_sent(rig, "step04")
    assert order == [0, 1, 2, 3, 4], (order, a.logs, b.logs)


def test_two_live_sidecars_moving_one_thread_at_once_make_one_move(adapter: Adapter, rig: Rig, tmp_path: Path,
                                                                   redis: str) -> None:
    """A and B both have the thread open: B's lock of it could not be taken (the failpoint
    ``thread.lock``, as when its folder is not writable), which stops nothing. Both are asked
    ``/optimise`` and both moves are held at their start (``swap.lease=hold``: the thread held,
    its lease not asked for), then let go together. The Redis lease and the store's claim let one
    commit; the other refuses, saying why, and its client's command is answered. The lineage does
    not fork, each client sees its one thread id, and a third sidecar loading the thread sends the
    model every turn answered."""
    rig.server.script = scenario()
    project = rig.home.project
    store = f"sqlite://{rig.home.root / 'shared.db'}"
    a, b, c = rig.home, host(rig, "b"), host(rig, "c")
    for home in (a, b, c):
        configure(home, store, 10_000_000, 5_000_000, redis)  # no move but the commands'
    points = {"a": tmp_path / "a", "b": tmp_path / "b"}
    failpoints = {"a": "swap.lease=hold", "b": "thread.lock=error,swap.lease=hold"}
    clients = {}
    for name, home in (("a", a), ("b", b)):
        clients[name] = AcpClient(home.liminal_argv(), {**home.env(), "LIMINAL_FAILPOINTS": failpoints[name],
                                                        "LIMINAL_FAILPOINTS_DIR": str(points[name])},
                                  project, home.logs / f"stderr-{name}-liminal.log")
        rig.clients.append(clients[name])
    with clients["a"] as on_a, clients["b"] as on_b:
        on_a.initialize()
        thread = on_a.new_session(project)["sessionId"]
        for n in range(3):
            assert f"read part {n:02d}" in said(on_a, thread, f"step{n:02d} please")
        handed_over_by(a, thread, project, "step02 please")
        on_b.initialize()
        on_b.load_session(thread, project, timeout=120)  # A still has it open
        answers: dict[str, str] = {}

        def optimise(name: str) -> None:
            answers[name] = said(clients[name], thread, "/optimise")

        asked = [threading.Thread(target=optimise, args=(name,)) for name in clients]
        for t in asked:
            t.start()
        for folder in points.values():
            wait_for(folder / "swap.lease.reached")
        for folder in points.values():
            (folder / "swap.lease.release").touch()
        for t in asked:
            t.join(180)
        moves = {name: moves_of(SwapJournal(home.liminal_home / "swaps.jsonl"), thread)
                 for name, home in (("a", a), ("b", b))}
        [winner] = [name for name, made in moves.items() if made]
        [loser] = [name for name in clients if name != winner]
        assert len(moves[winner]) == 1 and moves[winner][0][0] == thread, moves
        assert answers[winner].startswith("Context optimised"), answers
        # Refused by the lease the winner holds to its commit (or, had the winner been through
        # before the loser asked, by the store's claim): no move of it left unfinished.
        assert answers[loser].endswith("(nothing changed)") and "another liminal" in answers[loser], answers
        assert SwapJournal((a if loser == "a" else b).liminal_home / "swaps.jsonl").unfinished() == [], loser
        on_loser = clients[loser]
        on_loser.close()
        on_winner = clients[winner]
        assert "read part 03" in said(on_winner, thread, "step03 please")  # on the new session
        handed_over_by(a if winner == "a" else b, thread, project, "step03 please")
        assert lineage_in_store(a.liminal_home, thread) == [thread, moves[winner][0][1]]
    for client in clients.values():
        assert client.session_ids() == {thread}
    with client_of(c, rig, "c") as on_c:
        on_c.initialize()
        on_c.load_session(thread, project, timeout=120)
        said(on_c, thread, "FINAL please")
    assert steps_sent(rig, "FINAL") == [0, 1, 2, 3], (answers, a.logs, b.logs)
