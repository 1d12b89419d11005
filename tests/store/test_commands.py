"""``liminal threads``, ``history`` and ``search`` over a store the indexer filled."""

from __future__ import annotations

from pathlib import Path

import anyio
import orjson
import pytest

from liminal import cli
from liminal.ingest.indexer import Indexer
from liminal.store.sqlite import SqliteStore
from tests.store.conftest import conversation, event


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    for var in ("LIMINAL_STORE_URL", "LIMINAL_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)

    async def fill() -> None:
        store = await SqliteStore.open(tmp_path / "liminal.db")
        indexer = Indexer(store, tmp_path / "spool")
        for e in conversation():
            indexer.offer(e)
        indexer.offer(event("note", {"jsonrpc": "2.0", "method": "liminal/swap", "params": {
            "outcome": "committed", "tokens_before": 130000, "tokens_after": 80000,
            "duration_s": 0.4}}, thread="sess-1", backing="sess-2", time=1010.0))
        await indexer.aclose()
        await store.aclose()

    anyio.run(fill)
    return tmp_path


def test_threads(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["threads"]) == 0
    out = capsys.readouterr().out
    assert "sess-1" in out and "Refactor the flux capacitor module" in out
    assert "claude-agent-acp" in out and "12,345/200,000" in out
    assert cli.main(["threads", "--json"]) == 0
    [t] = orjson.loads(capsys.readouterr().out)
    assert (t["id"], t["turns"], t["swaps"], t["cwd"]) == ("sess-1", 1, 0, "/work/demo")


def test_history(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["history", "sess"]) == 0  # a unique prefix is enough
    out = capsys.readouterr().out
    for line in ("# Refactor the flux capacitor module", "> Refactor the flux capacitor module",
                 "  ~ Let me think.", "I will read the file.",
                 "[tool read · completed] Read flux.py", "    def gigawatts(): return 1.21",
                 "[plan] [ ] Rename gigawatts", "[usage] 12,345 / 200,000 tokens",
                 "[end: end_turn]", "[liminal: context swap committed 130,000 -> 80,000 tokens in 0.40 s]"):
        assert line in out
    assert cli.main(["history", "sess-1", "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert len(data["messages"]) == 9
    assert cli.main(["history", "nope"]) == 1


def test_search(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["search", "gigawatts"]) == 0
    out = capsys.readouterr().out
    assert "sess-1" in out and "gigawatts" in out
    assert cli.main(["search", "gigawatts", "--thread", "other", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == []
    assert cli.main(["search", "flux", "--json"]) == 0
    hits = orjson.loads(capsys.readouterr().out)
    assert hits and hits[0]["thread_id"] == "sess-1"


def test_no_store_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path / "empty"))
    monkeypatch.delenv("LIMINAL_STORE_URL", raising=False)
    assert cli.main(["threads"]) == 1
    assert "no store" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "liminal.db").exists()
