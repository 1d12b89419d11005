"""Claude Code's large tool outputs beside a session (``<id>/tool-results/``, issue 23): which
file a session line previews, written back with the session by ``SessionHarness.restore``, byte
for byte and 0600; recall's preview known as one. Codex keeps no such file, and says so.

The lines are the shapes the real CLIs wrote through the rig (docs/facts.md): 2.1.316 names the
file with an id of its own, 2.1.44 with the tool call's id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from liminal.config import GradientSettings
from liminal.harness.base import Beside, HarnessChoice
from liminal.harness.claude.live import ClaudeSessions
from liminal.harness.codex.live import CodexSessions
from liminal.harness.known import known_harnesses
from liminal.sessionfiles import RewriteError

SID = "a628ee5e-43a5-41c4-8fd9-9939aadbe006"
CWD = "/work/project"
FOLDER = "-work-project"


def preview(config: Path, name: str, sid: str = SID, size: str = "38KB") -> str:
    path = config / "projects" / FOLDER / sid / "tool-results" / name
    return (f"<persisted-output>\nOutput too large ({size}). Full output saved to: {path}\n\n"
            "Preview (first 2KB):\n1\n2\n3\n...\n</persisted-output>")


def tool_result_line(content: Any, *, extra: dict[str, Any] | None = None) -> bytes:
    record = {"parentUuid": "p1", "isSidechain": False, "type": "user", "message": {
        "role": "user", "content": [{"tool_use_id": "toolu_01fake00000000000000000002",
                                     "type": "tool_result", "content": content}]},
        "uuid": "u1", "timestamp": "2026-11-26T12:53:43.242Z", "cwd": CWD, "sessionId": SID,
        **(extra or {})}
    return json.dumps(record, separators=(",", ":")).encode()


@pytest.fixture
def claude(tmp_path: Path) -> ClaudeSessions:
    return ClaudeSessions(GradientSettings(), {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})


def test_a_line_that_previews_a_large_output_names_its_file_in_both_cli_versions(
        claude: ClaudeSessions, tmp_path: Path) -> None:
    config = tmp_path / "claude"
    newer = tool_result_line(preview(config, "bh6ttyhlx.txt"), extra={"toolUseResult": {
        "stdout": "1\n" * 100, "persistedOutputPath": "x", "persistedOutputSize": 38893}})
    older = tool_result_line(preview(config, "toolu_01fake00000000000000000002.txt"))
    assert claude.beside_in(newer) == (Beside(SID, "tool-results/bh6ttyhlx.txt"),)
    assert claude.beside_in(older) == (Beside(SID, "tool-results/toolu_01fake00000000000000000002.txt"),)
    # Content as a list of text blocks (an MCP tool's answer) is read the same.
    listed = tool_result_line([{"type": "text", "text": preview(config, "mcp-x.txt")}])
    assert claude.beside_in(listed) == (Beside(SID, "tool-results/mcp-x.txt"),)
    # The preview of a session on another machine names the same file: only its tail counts.
    elsewhere = tool_result_line(preview(Path("/home/someone else/.claude"), "bk7hci2lx.txt"))
    assert claude.beside_in(elsewhere) == (Beside(SID, "tool-results/bk7hci2lx.txt"),)


def test_what_is_no_preview_of_a_file_names_none(claude: ClaudeSessions, tmp_path: Path) -> None:
    config = tmp_path / "claude"
    assert claude.beside_in(tool_result_line("1\n2\n3\n")) == ()
    # A person quoting a preview in a prompt: no tool result, no file.
    said = json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": preview(config, "bk7hci2lx.txt")}]}}).encode()
    assert claude.beside_in(said) == ()
    # Names the CLI never makes never become paths.
    for name in ("../../../../etc/passwd", "a/b.txt", ".hidden", ""):
        assert claude.beside_in(tool_result_line(preview(config, name))) == (), name
    bad_session = preview(config, "x.txt").replace(SID, "not-a-session-id-at-all-0000000000000")
    assert claude.beside_in(tool_result_line(bad_session)) == ()
    assert claude.beside_in(b"<persisted-output> not json") == ()


def test_restore_writes_the_files_beside_the_session_byte_for_byte_0600(
        claude: ClaudeSessions, tmp_path: Path) -> None:
    config = tmp_path / "claude"
    older = "0b5c7a10-1111-4a2b-9c3d-000000000001"  # a rewrite's lines name its original's files
    line = tool_result_line(preview(config, "bh6ttyhlx.txt"))
    data = b"\x00\xff not UTF-8\r\n" + "é✓".encode() * 1000
    beside = {Beside(SID, "tool-results/bh6ttyhlx.txt"): data,
              Beside(older, "tool-results/toolu_1.txt"): b"older output\n"}
    path = claude.restore(SID, CWD, [line], beside.items())
    folder = config / "projects" / FOLDER
    assert path == folder / f"{SID}.jsonl" and path.read_bytes() == line + b"\n"
    written = folder / SID / "tool-results" / "bh6ttyhlx.txt"
    assert written.read_bytes() == data
    assert (folder / older / "tool-results" / "toolu_1.txt").read_bytes() == b"older output\n"
    for each in (written, folder / older / "tool-results" / "toolu_1.txt"):
        assert each.stat().st_mode & 0o777 == 0o600
        assert each.parent.stat().st_mode & 0o777 == 0o700
        assert each.parent.parent.stat().st_mode & 0o777 == 0o700
    # Found where the CLI keeps it, beside the session file or anywhere.
    assert claude.beside_path(Beside(SID, "tool-results/bh6ttyhlx.txt"), path) == written
    assert claude.beside_path(Beside(SID, "tool-results/bh6ttyhlx.txt"), None) == written
    assert claude.beside_path(Beside(SID, "tool-results/gone.txt"), path) is None


def test_restore_never_writes_over_a_file_nor_a_name_the_cli_would_not_make(
        claude: ClaudeSessions, tmp_path: Path) -> None:
    config = tmp_path / "claude"
    folder = config / "projects" / FOLDER
    there = folder / SID / "tool-results" / "kept.txt"
    there.parent.mkdir(parents=True)
    there.write_bytes(b"the CLI's own")
    line = tool_result_line(preview(config, "kept.txt"))
    claude.restore(SID, CWD, [line], [(Beside(SID, "tool-results/kept.txt"), b"another")])
    assert there.read_bytes() == b"the CLI's own"
    (folder / f"{SID}.jsonl").unlink()
    for name in ("../../x.txt", "tool-results/../../x.txt", "subagents/agent-1.jsonl"):
        with pytest.raises(ValueError):
            claude.restore(SID, CWD, [line], [(Beside(SID, name), b"x")])
        assert not (folder / f"{SID}.jsonl").exists()  # nothing written
    with pytest.raises(ValueError):
        claude.restore(SID, CWD, [line], [(Beside("../../etc", "tool-results/x.txt"), b"x")])
    claude.restore(SID, CWD, [line])
    with pytest.raises(RewriteError):  # the session is there: nothing beside it either
        claude.restore(SID, CWD, [line], [(Beside(SID, "tool-results/new.txt"), b"x")])
    assert not (folder / SID / "tool-results" / "new.txt").exists()


def test_a_recalled_preview_is_known_as_one(claude: ClaudeSessions, tmp_path: Path) -> None:
    config = tmp_path / "claude"
    assert claude.previews(preview(config, "bh6ttyhlx.txt").encode()) == \
        Beside(SID, "tool-results/bh6ttyhlx.txt")
    assert claude.previews(b"1\n2\n3\n") is None
    assert claude.previews(b'"<persisted-output>" in JSON') is None


def test_codex_keeps_no_file_beside_a_rollout(tmp_path: Path) -> None:
    codex = CodexSessions(GradientSettings(), {"CODEX_HOME": str(tmp_path / "codex")})
    line = tool_result_line(preview(tmp_path, "bh6ttyhlx.txt"))
    assert codex.beside_in(line) == ()
    assert codex.previews(preview(tmp_path, "x.txt").encode()) is None
    assert codex.beside_path(Beside(SID, "tool-results/x.txt"), None) is None
    with pytest.raises(ValueError):
        codex.restore(SID, None, [b'{"type":"session_meta"}'], [(Beside(SID, "tool-results/x.txt"), b"x")])


def test_the_harness_choice_asks_every_cli_for_a_preview(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex")}
    choice = HarnessChoice(known_harnesses(GradientSettings(), env), forced="codex")
    assert choice.harness.previews(preview(tmp_path / "claude", "x.txt").encode()) == \
        Beside(SID, "tool-results/x.txt")
    assert choice.harness.beside_in(tool_result_line(preview(tmp_path, "x.txt"))) == ()  # Codex's lines
