"""``session/delete`` answered by liminal (``liminal.kernel.delete``): what it advertises, which
sessions are the thread's, and the CLIs' files it removes (issue 25). The whole, with the real
CLIs: ``tests/acceptance/test_delete.py``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import orjson
import pytest

from liminal.config import GradientSettings
from liminal.harness.claude.live import ClaudeSessions
from liminal.harness.codex.live import CodexSessions
from liminal.kernel.delete import advertise
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.kernel.owned import claimed, whose
from tests.unit.test_router import from_agent, from_client, make

pytestmark = pytest.mark.anyio
THREAD = "11111111-1111-4111-8111-111111111111"
MOVED = "22222222-2222-4222-8222-222222222222"
OTHER = "33333333-3333-4333-8333-333333333333"


def test_delete_and_fork_are_advertised_beside_the_agents_capabilities_and_never_twice() -> None:
    said = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True,
                                                        "sessionCapabilities": {"resume": {}}}}
    assert advertise(said) == {"protocolVersion": 1, "agentCapabilities": {
        "loadSession": True, "sessionCapabilities": {"resume": {}, "delete": {}, "fork": {}}}}
    assert advertise({"agentCapabilities": {"sessionCapabilities": {"delete": {"_meta": {}}, "fork": {}}}}) is None
    assert advertise({"agentCapabilities": {"sessionCapabilities": {"fork": {"_meta": {}}}}}) == {
        "agentCapabilities": {"sessionCapabilities": {"fork": {"_meta": {}}, "delete": {}}}}
    assert advertise({}) == {"agentCapabilities": {"sessionCapabilities": {"delete": {}, "fork": {}}}}


def test_a_result_hook_amends_the_agents_answer_and_the_taps_keep_what_it_sent() -> None:
    router = make()
    router.add_result_hook(("initialize",), lambda method, result: advertise(result))
    from_client(router, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}')
    sent = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}'
    out = from_agent(router, sent)
    [line] = out.to_client
    assert orjson.loads(line)["result"]["agentCapabilities"] == {"sessionCapabilities": {"delete": {}, "fork": {}}}
    assert [e.raw for e in out.events] == [sent]
    # Another method's answer passes byte for byte; so does the answer when the hook fails.
    router.add_result_hook(("session/new",), lambda method, result: 1 / 0)  # type: ignore[arg-type, return-value]
    from_client(router, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}')
    new = b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"' + THREAD.encode() + b'"}}'
    out = from_agent(router, new)
    assert out.to_client == [new] and out.problems


async def test_the_lineage_is_every_session_the_thread_was_on(tmp_path: Path) -> None:
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    journal.append(SwapRecord(thread_id=THREAD, old_backing_id=THREAD, new_backing_id=MOVED,
                              outcome="committed", reason="test", started_at=1.0, duration_s=0.1,
                              tokens_before=None, tokens_after=None))
    journal.append(SwapRecord(thread_id=OTHER, old_backing_id=OTHER, new_backing_id="x",
                              outcome="committed", reason="test", started_at=1.0, duration_s=0.1,
                              tokens_before=None, tokens_after=None))
    found = await whose(THREAD, None, journal, await claimed(None, journal), now=MOVED)
    assert found.sessions == (THREAD, MOVED)
    # Another thread's sessions are never this one's, whatever names them.
    journal.append(SwapRecord(thread_id=OTHER, old_backing_id=MOVED, new_backing_id=None,
                              outcome="failed", reason="test", started_at=2.0, duration_s=0.1,
                              tokens_before=None, tokens_after=None))
    journal.append(SwapRecord(thread_id=THREAD, old_backing_id=MOVED, new_backing_id=OTHER,
                              outcome="begin", reason="test", started_at=3.0, duration_s=0.1,
                              tokens_before=None, tokens_after=None))
    found = await whose(THREAD, None, journal, await claimed(None, journal))
    assert found.sessions == (THREAD, MOVED)


def test_each_harness_removes_every_file_of_a_session_and_no_other(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex"),
           "HOME": str(tmp_path)}
    claude_dir = tmp_path / "claude"
    project = claude_dir / "projects" / "-w"
    for session in (THREAD, OTHER):  # what Claude Code keeps of a session, by its id
        for folder in (project / session / "subagents", claude_dir / "session-env" / session,
                       claude_dir / "file-history" / session, claude_dir / "todos", claude_dir / "debug"):
            folder.mkdir(parents=True, exist_ok=True)
        for name in (f"projects/-w/{session}.jsonl", f"projects/-w/{session}/subagents/a.jsonl",
                     f"file-history/{session}/abc@v1", f"todos/{session}-agent-{session}.json",
                     f"debug/{session}.txt"):
            (claude_dir / name).write_text("{}\n")
    claude = ClaudeSessions(GradientSettings(), env=env)
    assert len(claude.files(THREAD, "/w")) == 6
    assert len(claude.remove(THREAD, "/w")) == 6
    assert claude.files(THREAD, "/w") == []
    left = sorted(str(p.relative_to(claude_dir)) for p in claude_dir.rglob("*") if p.is_file())
    assert left and all(OTHER in name for name in left) and len(left) == 5, left
    assert claude.remove("../../etc", "/w") == []  # not a session id: never a path

    day = tmp_path / "codex" / "sessions" / "2026" / "11" / "26"
    archive = tmp_path / "codex" / "archived_sessions"
    day.mkdir(parents=True)
    archive.mkdir(parents=True)
    for folder, session in ((day, THREAD), (archive, THREAD), (day, OTHER)):
        (folder / f"rollout-2026-11-26T10-00-00-{session}.jsonl").write_text("{}\n")
    # Codex's databases: what they keep of the thread (its title, its history's items) goes too.
    import sqlite3

    for name, schema in (("state_5.sqlite", "CREATE TABLE threads (id TEXT PRIMARY KEY, title TEXT);"
                                            "CREATE TABLE thread_read_receipts (thread_id TEXT);"),
                         ("thread_history_1.sqlite", "CREATE TABLE thread_items (thread_id TEXT, item_json TEXT);")):
        with contextlib.closing(sqlite3.connect(tmp_path / "codex" / name)) as db, db:
            db.executescript(schema)
            for session in (THREAD, OTHER):
                table = "threads" if name.startswith("state") else "thread_items"
                db.execute(f"INSERT INTO {table} VALUES (?, ?)", (session, f"words of {session}"))
                if table == "threads":
                    db.execute("INSERT INTO thread_read_receipts VALUES (?)", (session,))
    codex = CodexSessions(GradientSettings(), env=env)
    assert len(codex.files(THREAD, None)) == 2
    assert len(codex.remove(THREAD, None)) == 2
    assert [p.name for p in day.iterdir()] == [f"rollout-2026-11-26T10-00-00-{OTHER}.jsonl"]
    assert list(archive.iterdir()) == []
    for name, table in (("state_5.sqlite", "threads"), ("state_5.sqlite", "thread_read_receipts"),
                        ("thread_history_1.sqlite", "thread_items")):
        with contextlib.closing(sqlite3.connect(tmp_path / "codex" / name)) as db:
            column = "id" if table == "threads" else "thread_id"
            assert [r[0] for r in db.execute(f"SELECT {column} FROM {table}")] == [OTHER], (name, table)


def test_codex_never_has_a_row_naming_a_rollout_that_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex warns of a row whose rollout is gone when it lists its threads (``state db
    list_threads returned stale rollout path``, seen in a full run): the rows go while the
    rollout is still there, and once more after it (a row the running Codex wrote between)."""
    import liminal.harness.codex.live as live

    env = {"CODEX_HOME": str(tmp_path / "codex"), "HOME": str(tmp_path)}
    day = tmp_path / "codex" / "sessions" / "2026" / "11" / "26"
    day.mkdir(parents=True)
    rollout = day / f"rollout-2026-11-26T10-00-00-{THREAD}.jsonl"
    rollout.write_text("{}\n")
    rollout_there: list[bool] = []

    def forget_rows(session_id: str, env: object = None) -> int:
        rollout_there.append(rollout.exists())
        return 0

    monkeypatch.setattr(live, "forget_rows", forget_rows)
    assert CodexSessions(GradientSettings(), env=env).remove(THREAD, None) == [rollout]
    assert rollout_there == [True, False]



@pytest.mark.parametrize("closed", [True, False])
def test_a_closed_side_session_is_removed_after_codex_has_let_it_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed: bool) -> None:
    """Codex tears a closed session down after answering the close: the teardown writes the
    thread's row once more, then deletes its shell snapshot. Removed before that, the row comes
    back naming a rollout that is gone (a full run's listing: "state db list_threads returned
    stale rollout path"). A Codex that has ended (``closed`` false) may leave the snapshot for
    good: nothing is waited for then."""
    import sqlite3

    import liminal.harness.codex.rollout as rollout_module

    home = tmp_path / "codex"
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path)}
    day = home / "sessions" / "2026" / "11" / "26"
    day.mkdir(parents=True)
    rollout = day / f"rollout-2026-11-26T10-00-00-{THREAD}.jsonl"
    rollout.write_text("{}\n")
    (home / "shell_snapshots").mkdir()
    snapshot = home / "shell_snapshots" / f"{THREAD}.123.sh"
    snapshot.write_text("export A=1\n")
    database = home / "state_5.sqlite"
    with contextlib.closing(sqlite3.connect(database)) as db, db:
        db.execute("CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT)")

    def teardown() -> None:  # what Codex does with the thread after the close was answered, once
        if not snapshot.exists():
            return
        with contextlib.closing(sqlite3.connect(database)) as db, db:
            db.execute("INSERT OR REPLACE INTO threads VALUES (?, ?)", (THREAD, str(rollout)))
        snapshot.unlink(missing_ok=True)

    waits: list[float] = []
    monkeypatch.setattr(rollout_module.time, "sleep", lambda seconds: (waits.append(seconds), teardown()))
    CodexSessions(GradientSettings(), env=env).forget(THREAD, "/side", closed=closed)
    if not closed:
        assert waits == [] and not rollout.exists()
        return
    teardown()  # a teardown that had not happened yet happens now
    with contextlib.closing(sqlite3.connect(database)) as db:
        rows = [r[0] for r in db.execute("SELECT rollout_path FROM threads")]
    assert waits and not rollout.exists() and not snapshot.exists()
    assert rows == [], "a row naming a rollout that is gone"



def test_a_codex_that_keeps_closed_threads_is_waited_on_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter on Codex's app server keeps a closed thread loaded (its snapshot stays): the
    first side session's files wait their bound, and removed, the next ones wait for nothing."""
    import types

    import liminal.harness.codex.rollout as rollout_module

    home = tmp_path / "codex"
    (home / "shell_snapshots").mkdir(parents=True)
    clock = [0.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(rollout_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=sleep))
    codex = CodexSessions(GradientSettings(), env={"CODEX_HOME": str(home), "HOME": str(tmp_path)})
    for session in (THREAD, OTHER):
        (home / "shell_snapshots" / f"{session}.1.sh").write_text("export A=1\n")
    codex.forget(THREAD, "/side", closed=True)
    assert sum(waits) >= rollout_module.RELEASE_SECONDS and not (home / "shell_snapshots" / f"{THREAD}.1.sh").exists()
    waits.clear()
    codex.forget(OTHER, "/side", closed=True)
    assert waits == [] and list((home / "shell_snapshots").iterdir()) == []


def _record(thread: str, old: str, new: str | None, at: float) -> SwapRecord:
    return SwapRecord(thread_id=thread, old_backing_id=old, new_backing_id=new, outcome="committed",
                      reason="test", started_at=at, duration_s=0.1, tokens_before=None, tokens_after=None,
                      zone=[{"key": "k", "kind": "passage", "score": 1.0, "text": "the deleted thread's words"}])


def test_the_journal_forgets_a_thread_and_loses_no_line_appended_meanwhile(tmp_path: Path) -> None:
    """A deleted thread's journal lines hold its text (what its rewrites placed in their dynamic
    zone): they go, the file written anew; two liminals on the home append meanwhile (two
    journals on one file, each its own lock) and none of their lines is lost, and a reader that
    follows the file by its offset reads it again."""
    import threading

    path = tmp_path / "swaps.jsonl"
    writer, deleter, reader = SwapJournal(path), SwapJournal(path), SwapJournal(path)
    writer.append(_record(THREAD, THREAD, MOVED, 1.0))
    assert reader.current(THREAD) == (MOVED, [MOVED])
    done = threading.Event()

    def append() -> None:
        for n in range(300):
            writer.append(_record(OTHER, OTHER, str(n), 2.0 + n))
        done.set()

    appender = threading.Thread(target=append)
    appender.start()
    forgotten = 0
    while not done.is_set():
        deleter.append(_record(THREAD, THREAD, MOVED, 1.0))
        forgotten += deleter.forget(THREAD)
    appender.join()
    forgotten += deleter.forget(THREAD)
    assert forgotten >= 2
    assert [r.new_backing_id for r in reader.records()] == [str(n) for n in range(300)]
    assert all(r.thread_id == OTHER for r in reader.records())
    assert reader.current(THREAD) == (None, [])
    assert reader.current(OTHER)[0] == "299"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert deleter.forget(THREAD) == 0


def test_a_journal_written_anew_on_the_inode_it_had_is_read_again(tmp_path: Path) -> None:
    """A reader follows the journal by its inode and offset; the file ``forget`` renames into
    place may get the inode number of the one read before (freed by that very rename: the test
    above failed 2 runs in 12 so). Written here in place, the same inode: the reader still sees
    that what it read is gone."""
    path = tmp_path / "swaps.jsonl"
    writer, reader = SwapJournal(path), SwapJournal(path)
    writer.append(_record(THREAD, THREAD, MOVED, 1.0))
    assert reader.current(THREAD) == (MOVED, [MOVED])
    inode = path.stat().st_ino
    other = SwapJournal(tmp_path / "other.jsonl")
    for n in range(3):
        other.append(_record(OTHER, OTHER, str(n), 2.0 + n))
    with path.open("r+b") as f:  # the deleted thread's line gone, other threads' in its place
        f.write((tmp_path / "other.jsonl").read_bytes())
        f.truncate()
    assert path.stat().st_ino == inode
    assert reader.current(THREAD) == (None, [])
    assert reader.current(OTHER) == ("2", ["0", "1", "2"])


def _claude_line(session: str | None, text: str, **pasted: str) -> bytes:
    """A line of Claude Code's ``history.jsonl`` as its terminal interface appends it (2.1.44's
    ``addToHistory``: the prompt's words, pastes past 1,024 characters by their hash)."""
    line: dict[str, object] = {
        "display": text, "timestamp": 1_796_630_907_273, "project": "/w",
        "pastedContents": {str(n): {"id": n, "type": "text", "contentHash": digest}
                           for n, digest in enumerate(pasted.values(), 1)}}
    if session is not None:
        line["sessionId"] = session
    return orjson.dumps(line) + b"\n"


def test_each_harness_removes_its_logs_lines_of_a_session_and_no_other(tmp_path: Path) -> None:
    """What a deleted thread leaves in the CLIs' logs of every session: Claude Code's prompt
    history (and the pastes only its lines name), Codex's thread names (as codex-agent wrote one
    for ``session/set_title`` in the rig) and Codex's prompt history. Every other line stays
    byte for byte, the file's mode too."""
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex"),
           "HOME": str(tmp_path)}
    claude_dir, codex_dir = tmp_path / "claude", tmp_path / "codex"
    (claude_dir / "paste-cache").mkdir(parents=True)
    codex_dir.mkdir()
    for digest in ("aaaa1111bbbb2222", "cccc3333dddd4444"):
        (claude_dir / "paste-cache" / f"{digest}.txt").write_text("a long paste of the thread's\n")
    kept = [_claude_line(OTHER, "the other thread's prompt", one="cccc3333dddd4444"),
            _claude_line(None, "an old line: a project and a time, no session"), b"not json\n"]
    history = claude_dir / "history.jsonl"
    history.write_bytes(_claude_line(THREAD, "the deleted thread's words", one="aaaa1111bbbb2222")
                        + kept[0] + _claude_line(MOVED, "its words again", one="cccc3333dddd4444")
                        + kept[1] + kept[2])
    history.chmod(0o600)
    claude = ClaudeSessions(GradientSettings(), env=env)
    assert claude.lines() == {THREAD: 1, OTHER: 1, MOVED: 1}
    assert claude.remove_lines(["../x"]) == 0 and claude.remove_lines([THREAD, MOVED]) == 2
    assert history.read_bytes() == b"".join(kept) and oct(history.stat().st_mode & 0o777) == "0o600"
    # The paste only the deleted lines named went; one another session's line names stays.
    assert sorted(p.name for p in (claude_dir / "paste-cache").iterdir()) == ["cccc3333dddd4444.txt"]
    assert not (claude_dir / "history.jsonl.lock").exists()
    assert claude.remove_lines([THREAD]) == 0

    def names(session: str, name: str) -> bytes:  # as codex-agent's ``session/set_title`` wrote it
        return orjson.dumps({"id": session, "thread_name": name, "updated_at": "2026-12-07T08:12:30.484194638Z"}) + b"\n"

    index = codex_dir / "session_index.jsonl"
    index.write_bytes(names(THREAD, "Zulu named thread") + names(OTHER, "Kept") + names(THREAD, "Renamed"))
    index.chmod(0o644)
    prompts = codex_dir / "history.jsonl"
    prompts.write_bytes(b'{"session_id":"%s","ts":1796630948,"text":"typed in codex"}\n' % THREAD.encode()
                        + b'{"session_id":"%s","ts":1796630949,"text":"another"}\n' % OTHER.encode())
    codex = CodexSessions(GradientSettings(), env=env)
    assert codex.lines() == {THREAD: 3, OTHER: 2}
    assert codex.remove_lines([THREAD]) == 3
    assert index.read_bytes() == names(OTHER, "Kept") and oct(index.stat().st_mode & 0o777) == "0o644"
    assert prompts.read_bytes() == b'{"session_id":"%s","ts":1796630949,"text":"another"}\n' % OTHER.encode()
    assert codex.lines() == {OTHER: 2}
    # A session's shell snapshot (codex-zed leaves it at its input's end) is one of its files.
    snapshots = codex_dir / "shell_snapshots"
    snapshots.mkdir()
    (snapshots / f"{THREAD}.1796630948632678535.sh").write_text("declare -x HOME=/home/someone\n")
    (snapshots / f"{OTHER}.1796630948632678535.sh").write_text("declare -x HOME=/home/someone\n")
    assert [p.name for p in codex.remove(THREAD, None)] == [f"{THREAD}.1796630948632678535.sh"]
    assert [p.name for p in snapshots.iterdir()] == [f"{OTHER}.1796630948632678535.sh"]


def _append_claude(log: Path, lines: list[bytes]) -> None:
    """Claude Code's append: ``proper-lockfile``'s lock folder, then the file opened by its name."""
    import time

    lock = log.with_name(log.name + ".lock")
    for line in lines:
        while True:
            try:
                lock.mkdir()
                break
            except FileExistsError:
                time.sleep(0.001)
        try:
            with log.open("ab") as handle:
                handle.write(line)
        finally:
            lock.rmdir()


def _append_codex_names(log: Path, lines: list[bytes]) -> None:
    """Codex 0.166's: an exclusive flock on ``session_index.jsonl.lock``, then the file by its name."""
    import fcntl
    import os

    for line in lines:
        fd = os.open(log.with_name(log.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with log.open("ab") as handle:
                handle.write(line)
        finally:
            os.close(fd)


def _append_codex_prompts(log: Path, lines: list[bytes]) -> None:
    """Codex's prompt history: the file opened first, then an exclusive flock on it, then the write."""
    import fcntl
    import os

    for line in lines:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
        finally:
            os.close(fd)


@pytest.mark.parametrize("log", ["claude history", "codex names", "codex prompts"])
def test_a_line_the_cli_appends_during_the_removal_is_never_lost(tmp_path: Path, log: str) -> None:
    """The CLI appends as liminal removes a deleted thread's lines, each taking its lock as its CLI
    does: every line of another session is there at the end, none of the deleted one's."""
    import threading

    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex"),
           "HOME": str(tmp_path)}
    (tmp_path / "claude").mkdir()
    (tmp_path / "codex").mkdir()
    if log == "claude history":
        path, append, harness = tmp_path / "claude" / "history.jsonl", _append_claude, ClaudeSessions(GradientSettings(), env=env)

        def line(session: str, n: int) -> bytes:
            return _claude_line(session, f"prompt {n}")
    else:
        name = "session_index.jsonl" if log == "codex names" else "history.jsonl"
        path = tmp_path / "codex" / name
        append = _append_codex_names if log == "codex names" else _append_codex_prompts
        harness = CodexSessions(GradientSettings(), env=env)  # type: ignore[assignment]
        key = "id" if log == "codex names" else "session_id"

        def line(session: str, n: int) -> bytes:
            return orjson.dumps({key: session, "ts": n, "text": f"prompt {n}"}) + b"\n"
    path.write_bytes(b"".join(line(THREAD, n) for n in range(50)))
    theirs = [line(OTHER, n) for n in range(300)]
    writer = threading.Thread(target=append, args=(path, theirs))
    writer.start()
    removed = 0
    while True:
        append(path, [line(THREAD, 999)])
        removed += harness.remove_lines([THREAD])
        if not writer.is_alive():
            break
    writer.join()
    removed += harness.remove_lines([THREAD])
    assert removed >= 51
    assert path.read_bytes() == b"".join(theirs)


def test_a_lock_the_cli_holds_too_long_leaves_the_log_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held past the wait: nothing removed, said (``LogBusy``), for doctor and purge to find
    later. A lock folder older than Claude Code's staleness is a holder that died: taken."""
    import fcntl
    import os
    import time

    from liminal.harness import logs

    monkeypatch.setattr(logs, "WAIT_SECONDS", 0.2)
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex")}
    (tmp_path / "codex").mkdir()
    index = tmp_path / "codex" / "session_index.jsonl"
    index.write_bytes(orjson.dumps({"id": THREAD, "thread_name": "x"}) + b"\n")
    fd = os.open(tmp_path / "codex" / "session_index.jsonl.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    codex = CodexSessions(GradientSettings(), env=env)
    with pytest.raises(logs.LogBusy):
        codex.remove_lines([THREAD])
    assert codex.lines() == {THREAD: 1}
    os.close(fd)
    assert codex.remove_lines([THREAD]) == 1

    (tmp_path / "claude").mkdir()
    history = tmp_path / "claude" / "history.jsonl"
    history.write_bytes(_claude_line(THREAD, "words"))
    lock = tmp_path / "claude" / "history.jsonl.lock"
    lock.mkdir()
    claude = ClaudeSessions(GradientSettings(), env=env)
    with pytest.raises(logs.LogBusy):
        claude.remove_lines([THREAD])
    old = time.time() - 30
    os.utime(lock, (old, old))
    assert claude.remove_lines([THREAD]) == 1 and not lock.exists() and history.read_bytes() == b""


async def test_a_deleted_threads_lock_file_is_gone_with_it(tmp_path: Path) -> None:
    """``liminal acp`` and ``liminal serve`` lock a thread under a file named for its id in the
    home; a deletion leaves no file naming the thread, that one included (held or not)."""
    from liminal.kernel.owned import Holdings, Whose
    from liminal.serve.locks import ThreadLocks

    thread = "0f8fad5b-d9cb-469f-a165-70867728950e"
    locks = ThreadLocks(tmp_path)
    assert await locks.try_take(thread.upper())  # held, as a live sidecar holds it
    other = "9b2a3c4d-0000-4000-8000-000000000001"
    assert await locks.try_take(other)
    holdings = Holdings(store=None, cache=None, harnesses=[], home=tmp_path, journal=None)
    removed = await holdings.remove(Whose(thread.upper(), (thread.upper(),)))
    assert not removed.failed
    assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == [f"{other}.lock"]
    await locks.release_all()
