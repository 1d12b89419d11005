"""What people read (issue 20): every command a person reads prints a table or a transcript that
fits 100 columns when piped (plain text) and goes through rich on a terminal; a thread's history
shows each turn once (no usage point per line, each tool output once); numbers carry their units
(tokens in k, payback in calls) and nouns their number."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import pytest

from liminal import cli
from liminal.kernel.journal import SwapJournal, SwapRecord
from liminal.store.records import Batch, ThreadUpdate
from liminal.store.sqlite import SqliteStore
from tests.store.test_search_conversation import FACT, THREAD, fill

REPO = Path(__file__).resolve().parents[2]
LONG_CWD = "/home/someone/projects/a-rather-long-client-name/services/payments-gateway-reconciliation"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)
    db = tmp_path / "liminal.db"
    anyio.run(fill, db)

    async def more() -> None:  # a second thread with a long title and folder
        store = await SqliteStore.open(db)
        await store.write(Batch(threads=[ThreadUpdate(
            "0b8e2f3a-1c4d-4e5f-8a9b-0c1d2e3f4a5b", 1_790_000_500.0,
            title="Work out why the nightly reconciliation job double-counts refunds issued "
                  "after midnight UTC", cwd=LONG_CWD, harness="@zed-industries/codex-acp",
            backing_ids=("0b8e2f3a-1c4d-4e5f-8a9b-0c1d2e3f4a5b",))]))
        await store.aclose()

    anyio.run(more)
    journal = SwapJournal(tmp_path / "swaps.jsonl")
    journal.append(SwapRecord(
        THREAD, THREAD, "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", "committed",
        "context 131.2k tokens >= 120k: the rebuild (12.3k) pays back in 24 calls of the 80 before "
        "the next swap", 1_790_000_200.0, 0.42, 131_200, 38_500, cwd="/work/demo",
        cost={"rebuild": 12_345.6, "saves_per_call": 9_270.0, "payback_calls": 24.3,
              "calls_to_next": 80.0}))
    return tmp_path


def lines_of(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert cli.main(list(argv)) == 0, argv
    return capsys.readouterr().out.splitlines()


def test_threads_names_the_cli_in_a_word_and_fits(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = lines_of(capsys, "threads")
    assert all(len(line) <= 100 for line in out), "\n".join(out)
    assert "@agentclientprotocol" not in "\n".join(out) and "codex-acp" not in "\n".join(out)
    [row] = [line for line in out if line.startswith(THREAD[:8])]
    assert " claude " in row and "Flux work" in row and "12.1k/1,000k" in row
    [other] = [line for line in out if line.startswith("0b8e2f3a")]
    assert " codex " in other and "Work out why the" in other and "…" in other
    # A path is cut at its start: its end says most.
    assert f"{LONG_CWD[-10:]} " in other and LONG_CWD[:10] not in other


def test_history_shows_each_turn_once(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = "\n".join(lines_of(capsys, "history", THREAD[:8]))
    # Three usage points a turn, once in the turn's heading as the context at its end.
    assert "[usage]" not in out and "── turn 1 · " in out and "context 11.8k of 1,000k tokens" in out
    # The tool's output came as content (in a Markdown fence) and again as raw output: once.
    assert out.count("zanzibar-tool-output\n") == 2, out  # the call's title, its output
    assert "```" not in out and "[end: end_turn]" not in out
    assert "1 backing session\n" in out and "session(s)" not in out
    assert out.count(f"> {FACT}") == 1
    assert all(len(line) <= 100 for line in out.splitlines())
    everything = "\n".join(lines_of(capsys, "history", THREAD, "--all"))
    assert everything.count("[usage]") == 8


def test_swaps_say_their_units(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = lines_of(capsys, "swaps")
    assert all(len(line) <= 100 for line in out), "\n".join(out)
    [row] = [line for line in out if " swap " in line]
    assert "24 calls" in row and "131.2k -> 38.5k" in row and "12.3k" in row and "9.3k/call" in row
    assert "0.42 s" in row and THREAD[:8] in row and THREAD not in row


@pytest.mark.parametrize("argv", [
    ["threads"], ["threads", "--all"], ["history", THREAD], ["history", THREAD, "--full"],
    ["search", "zanzibar"], ["search", "zanzibar", "--all"], ["swaps"], ["config"], ["doctor"],
    ["inspect", str(REPO / "fixtures/claude/new-32.jsonl")],
], ids=" ".join)
def test_piped_output_fits_100_columns(home: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    # What a person might have set: a store in a deep folder, a project there too.
    monkeypatch.setenv("LIMINAL_STORE_URL", f"sqlite://{home}/liminal.db")
    monkeypatch.setenv("PATH", f"{LONG_CWD}/node_modules/.bin:/usr/bin:/bin")
    code = cli.main(argv)
    out = capsys.readouterr().out
    assert code in (0, 1) and out.strip(), argv
    wide = [line for line in out.splitlines() if len(line) > 100]
    assert not wide, "\n".join(wide)
    assert "\x1b[" not in out  # no escape codes in a pipe


@pytest.mark.parametrize("argv", [["threads"], ["history", THREAD], ["search", "zanzibar"], ["swaps"],
                                  ["config"]], ids=" ".join)
def test_a_terminal_gets_rich(home: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    from liminal.commands import _out

    monkeypatch.setattr(_out, "terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "140")
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.strip() and max(len(line) for line in out.splitlines()) <= 140
    if argv[0] in ("threads", "config"):
        assert "─" in out  # rich's header rule
    if argv[0] == "threads":
        assert "Flux work" in out and " claude " in out


def test_the_when_column_is_local_time(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = "\n".join(lines_of(capsys, "swaps"))
    assert time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_790_000_200.0)) in out


@pytest.mark.parametrize("on_terminal", [False, True], ids=["piped", "terminal"])
def test_a_tools_escape_sequences_reach_no_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch, on_terminal: bool) -> None:
    """A tool's output is stored as the tool wrote it, colours and all; shown as it was, a
    window-title sequence in it retitled the reader's terminal (rich passes escapes through)."""
    from liminal.ingest.indexer import Indexer
    from tests.store.conftest import event

    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    monkeypatch.delenv("LIMINAL_STORE_URL", raising=False)
    if on_terminal:
        from liminal.commands import _out

        monkeypatch.setattr(_out, "terminal", lambda: True)
    output = "\x1b]0;pwned\x07\x1b[31mFAILED\x1b[0m test_flux\x1b[2J"

    async def fill() -> None:
        store = await SqliteStore.open(tmp_path / "liminal.db")
        indexer = Indexer(store, tmp_path / "spool")
        for n, message in enumerate([
            {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
             "params": {"sessionId": "t1", "prompt": [{"type": "text", "text": "run the tests"}]}},
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "t1", "update": {
                "sessionUpdate": "tool_call", "toolCallId": "c1", "title": "pytest", "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": output}}]}}},
            {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}]):
            indexer.offer(event("c2a" if n == 0 else "a2c", message, thread="t1", backing="t1",
                                method="session/prompt" if n != 1 else None, time=1_790_000_000.0 + n))
        await indexer.aclose()
        await store.aclose()

    anyio.run(fill)
    assert cli.main(["history", "t1"]) == 0
    out = capsys.readouterr().out
    assert "FAILED test_flux" in out and "\x1b" not in out and "\x07" not in out, repr(out)


def terminal_of(monkeypatch: pytest.MonkeyPatch, columns: int, *, colours: bool = False) -> None:
    """The commands print to a terminal ``columns`` wide (with ``colours``, rich's escapes)."""
    from rich.console import Console

    from liminal.commands import _out

    monkeypatch.setattr(_out, "terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", str(columns))
    if colours:
        monkeypatch.setattr(_out, "console", lambda: Console(
            file=__import__("sys").stdout, highlight=False, force_terminal=True, color_system="standard"))


def test_turns_are_the_conversations_not_liminals_commands(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The thread had three turns with the model and two of liminal's commands (``/search``,
    ``/rename``); TURNS said 5."""
    import orjson

    [listed] = [t for t in orjson.loads("\n".join(lines_of(capsys, "threads", "--json"))) if t["id"] == THREAD]
    assert listed["turns"] == 3
    [row] = [line for line in lines_of(capsys, "threads") if line.startswith(THREAD[:8])]
    assert row.split()[-5] == "3", row  # TURNS, before CONTEXT, MOVES and the time


@pytest.mark.parametrize("argv", [["threads"], ["swaps"], ["config"]], ids=" ".join)
def test_at_80_columns_on_a_terminal_no_column_is_lost(home: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    """At 80 columns ``liminal threads`` dropped LAST ACTIVITY and cut MOVES to ``MOV``, and
    ``liminal swaps`` cut its headers (``PAYBAC…``) and its figures: a table that cannot fit is
    printed a block a row, every field there and labelled; one that fits is a table."""
    terminal_of(monkeypatch, 80)
    out = "\n".join(lines_of(capsys, *argv))
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "…" not in out, out  # nothing cut: too long for a line, it wraps
    words = " ".join(out.split())
    if argv == ["threads"]:
        assert "Work out why the nightly reconciliation job double-counts refunds issued after midnight UTC" \
            in words.replace("- ", "-"), out
        assert LONG_CWD in re.sub(r"([/-])\n +", r"\1", out), out  # wrapped after a slash or a hyphen
        assert "3 turns" in words and "context 12.1k/1,000k" in words and "0 moves" in words, out
        assert "last active " + time.strftime("%Y-%m-%d %H:%M", time.localtime(1_790_000_500.0)) in words, out
    elif argv == ["swaps"]:
        assert "swap · 131.2k -> 38.5k tokens" in words and "rebuild 12.3k" in words, out
        assert "saves 9.3k/call · pays back in 24 calls · took 0.42 s" in words, out
        assert ("context 131.2k tokens >= 120k: the rebuild (12.3k) pays back in 24 calls of the 80 "
                "before the next swap") in words, out
    else:  # a table still, its headers whole
        assert ["SETTING", "VALUE", "FROM"] in [line.split() for line in out.splitlines()], out
        assert "swap.cache_life_seconds 300 s (5 min) default" in words, out


def test_piped_config_reads_as_config_toml_with_units(home: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped, ``liminal config`` printed Python's reprs (``'info'``, ``True``), sizes in bytes
    alone (``67108864``) and wrapped a path in the middle of a word."""
    deep = home / "a-folder-for-stores" / "with-a-longer-name" / "one-more-level" / "and-the-last"
    deep.mkdir(parents=True)
    monkeypatch.setenv("LIMINAL_STORE_URL", f"sqlite://{deep}/liminal.db")
    out = lines_of(capsys, "config")
    rows = {line.split()[0]: line for line in out if line[:1].isalpha() and not line.startswith(("home", "config", "env", "floor"))}
    assert '"info"' in rows["log_level"] and not re.search(r"'\w+'", "\n".join(rows.values()))
    assert " true " in rows["store.index"] and "True" not in "\n".join(out)
    assert "67108864 bytes (64 MiB)" in rows["proxy.max_frame_bytes"]
    assert "300 s (5 min)" in rows["swap.cache_life_seconds"] and "604800 s (7 days)" in rows["cache.ttl_seconds"]
    assert "100000 tokens (100k)" in rows["gradient.target_tokens"]
    assert "unset (chosen per thread)" in rows["swap.high_tokens"]
    assert rows["swap.notice"].split()[1:] == ['"thought"', "default"]
    text = "\n".join(out)
    assert all(part in text for part in str(deep).split("/")), text  # broken after slashes only
    assert rows["store.url"].split()[-1] == "env" and "LIMINAL_STORE_URL" in text
    assert out[0] == f"home: {home} (env LIMINAL_HOME)" and out[1].startswith(f"config file: {home}/config.toml")


def test_doctor_says_how_to_make_a_config_file_private(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config.toml made the usual way (an editor, ``cat >``: 0644) failed the home check with
    "1 files ... readable by others", saying neither which mode nor how to fix it."""
    for path in home.rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)
    config = home / "config.toml"
    config.write_text('log_level = "info"\n')
    config.chmod(0o644)
    assert cli.main(["doctor"]) == 1
    # A long path (pytest's, under xdist) wraps after a slash: compared without the whitespace.
    said = "".join(capsys.readouterr().out.split())
    expected = f"PROBLEM home {config} is 0644: readable by others; fix with chmod 600 {config}"
    assert "".join(expected.split()) in said, said


def test_search_centres_the_excerpt_on_the_match_and_marks_it(
        home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A find far into a long message showed its first 160 characters, cut mid-word
    (``…lease remember these design notes…``), without the words searched for; on a terminal
    they are marked."""
    from liminal.store.records import MessageRecord

    before = " ".join(f"filler{n}" for n in range(200))
    said = f"{before} the flux capacitor needs 1.21 gigawatts {before}"

    async def add() -> None:
        store = await SqliteStore.open(home / "liminal.db")
        try:
            await store.write(Batch(messages=[MessageRecord(
                "c0:99", THREAD, "c0:99", 1_790_000_300.0, "99", "agent", said, data={})]))
        finally:
            await store.aclose()

    anyio.run(add)
    out = "\n".join(lines_of(capsys, "search", "gigawatts"))
    [excerpt] = [" ".join(lines.split()) for lines in re.split(r"\n(?! )", out) if "gigawatts" in lines]
    excerpt = excerpt.split("· model ", 1)[1]
    assert excerpt.startswith("…filler") and excerpt.endswith("…"), excerpt
    words = excerpt.strip("…").split()
    assert words[0] in before.split() and words[-1] in before.split(), excerpt  # whole words
    at = excerpt.index("gigawatts")
    assert abs(at - (len(excerpt) - at)) < 40, excerpt  # in the middle
    terminal_of(monkeypatch, 100, colours=True)
    shown = "\n".join(lines_of(capsys, "search", "gigawatts"))
    assert "\x1b[1;7mgigawatts\x1b[0m" in shown, repr(shown)
