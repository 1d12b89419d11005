"""``liminal compress`` and ``liminal inspect`` end to end, in process, on literal and real files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from liminal.cli import main
from liminal.gradient.recall import RecallKey
from liminal.harness.claude.conversation import build
from liminal.harness.claude.gradient.rewrite import rewrite_session
from liminal.harness.claude.paths import locate
from liminal.harness.claude.recall import resolve_in
from liminal.harness.claude.records import read_session
from tests.transcript import SID, Transcript

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path / "liminal-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))


def session_file(tmp_path: Path, turns: int = 60) -> Path:
    t = Transcript()
    for n in range(turns):
        t.turn(n, parallel=2, size=3000, prose=20)
    return t.write(tmp_path)


def test_compress_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = session_file(tmp_path)
    assert main(["compress", SID, "--target-tokens", "40000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"new_session_id", "path", "tokens_before", "tokens_after"} <= set(out)
    assert out["tokens_after"] <= 40_000 < out["tokens_before"]
    assert Path(out["path"]).parent == src.parent and Path(out["path"]).exists()


def test_compress_text_says_how_to_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session_file(tmp_path)
    assert main(["compress", SID, "--target-tokens", "20000"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"resume +cd /work/project && claude --resume [0-9a-f-]{36}", text)


def test_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = session_file(tmp_path, 20)
    assert main(["compress", str(src), "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["written"] is False
    assert list(src.parent.iterdir()) == [src]


@pytest.mark.parametrize("ref", ["nonexistent.jsonl", "0b5c7a10-1111-4a2b-9c3d-00000000ffff",
                                 "not-a-session"])
def test_bad_references_fail_clearly(ref: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compress", ref]) == 1
    assert "liminal compress:" in capsys.readouterr().err


def test_non_session_and_corrupt_files_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\x00\x01 not json\n" * 50)
    assert main(["compress", str(junk)]) == 1
    assert main(["inspect", str(junk)]) == 1
    err = capsys.readouterr().err
    assert "not a Claude Code session" in err or "not JSON" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.jsonl"]


def test_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session_file(tmp_path)
    assert main(["inspect", SID, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["turns"] == 60 and data["tool_calls"] == 120
    assert data["records_by_type"]["assistant"] > 0
    assert set(data["bands"]) == {"recent", "middle", "old", "ancient"}
    assert main(["inspect", SID]) == 0
    assert "tool_results" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["zed-32.jsonl", "new-32.jsonl", "zed-compact.jsonl"])
def test_real_sessions(name: str, tmp_path: Path) -> None:
    """Files written by the real Claude Code (2.1.44 and 2.1.316): rewrite, twice."""
    src = tmp_path / name
    src.write_bytes((FIXTURES / name).read_bytes())
    conv = build(read_session(locate(src)))
    assert conv.unpaired_uses == set() and conv.broken_parent is None
    first = rewrite_session(src, 22_000)
    # Over the target only when the recent band (whole, whatever the target) and the preamble
    # are all that is left.
    assert first.tokens_after <= 22_000 or first.turns["middle"] + first.turns["old"] == 0, first.turns
    text = first.path.read_text()
    for key in re.findall(r"with key ([^\s\]]+)\]", text):
        assert resolve_in(locate(src), RecallKey.parse(key))
    second = rewrite_session(first.path, 18_000)
    assert second.tokens_after <= max(18_000, second.tokens_before)
    assert src.read_bytes() == (FIXTURES / name).read_bytes()


def test_progress_shows_only_for_long_files(capsys: pytest.CaptureFixture[str]) -> None:
    from liminal.commands.compress import _Progress

    small = _Progress()
    small("read", 10, 1000)
    small.close()
    assert capsys.readouterr().err == ""
    big = _Progress()
    big("read", 20 << 20, 40 << 20)
    big("write", 40 << 20, 40 << 20)
    big.close()
    err = capsys.readouterr().err
    assert "read:  50%" in err and "write: 100%" in err and err.endswith("\x1b[K")


@pytest.mark.parametrize("new_id", ["../../x", "a/b", "x" * 300])
def test_a_new_id_that_is_not_a_session_id_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], new_id: str,
) -> None:
    """Refused for a Codex rollout, a traceback (ValueError, or an OSError for a long name) for
    a Claude Code session."""
    src = session_file(tmp_path)
    assert main(["compress", SID, "--new-id", new_id]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--new-id" in err, err
    assert [p.name for p in src.parent.iterdir()] == [src.name]
