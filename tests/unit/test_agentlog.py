"""The agent's stderr cut into lines (``liminal.transport.agentlog``): however the pipe's reads
split it, each line once, none longer than the cap, no colour codes when stderr is not a
terminal; the writer's queue bounded, what it drops counted."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liminal.transport import agentlog
from liminal.transport.agentlog import MAX_LINE_BYTES, AgentLog


class Taken:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def put(self, text: str, agent: int | None) -> None:
        self.lines.append(text)


def expected(data: bytes) -> list[str]:
    """The lines of ``data`` as the cap would cut them (the last one without its newline too)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    out = []
    for line in lines:
        text = line[:MAX_LINE_BYTES].decode("utf-8", "replace").rstrip("\r")
        if len(line) > MAX_LINE_BYTES:
            text += f" … (cut at {MAX_LINE_BYTES:,} bytes)"
        out.append(text)
    return out


def read(data: bytes, cuts: list[int], monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], AgentLog]:
    taken = Taken()
    monkeypatch.setattr(agentlog, "_writer", taken)
    stderr = AgentLog(7)
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        stderr.feed(data[start:cut])
        start = max(start, cut)
    stderr.close()
    return taken.lines, stderr


pieces = st.lists(st.one_of(st.binary(max_size=40), st.just(b"\n"), st.just(b"x" * (MAX_LINE_BYTES - 1)),
                            st.just(b"\r\n")), max_size=30)


@given(parts=pieces, cuts=st.lists(st.integers(min_value=0, max_value=60_000), max_size=8))
@settings(max_examples=300, deadline=None)
def test_lines_whatever_the_reads(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(parts)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(agentlog, "_stderr_is_terminal", lambda: False)
        lines, _ = read(data, [c for c in cuts if c <= len(data)], monkeypatch)
    assert lines == [agentlog.plain(line) for line in expected(data)]


def test_a_line_without_end_is_cut_and_the_next_one_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"y" * (5 * MAX_LINE_BYTES) + b"\nnext\n"
    lines, stderr = read(data, list(range(1000, len(data), 1000)), monkeypatch)
    assert lines == ["y" * MAX_LINE_BYTES + f" … (cut at {MAX_LINE_BYTES:,} bytes)", "next"]
    assert stderr.last_words() == "next"


def test_colours_are_stripped_off_a_terminal_and_kept_on_one(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"\x1b[31mERROR\x1b[0m npm error 404\n\n"
    monkeypatch.setattr(agentlog, "_stderr_is_terminal", lambda: False)
    lines, stderr = read(data, [], monkeypatch)
    assert lines == ["ERROR npm error 404", ""]
    assert stderr.last_words() == "ERROR npm error 404"
    monkeypatch.setattr(agentlog, "_stderr_is_terminal", lambda: True)
    lines, stderr = read(data, [], monkeypatch)
    assert lines == ["\x1b[31mERROR\x1b[0m npm error 404", ""]
    assert stderr.last_words() == "ERROR npm error 404"  # a message to a client: never colours


@pytest.mark.parametrize(("said", "words"), [
    (["npm warn exec The following package was not found and will be installed: x@1",
      "npm error code E404", "npm error 404 Not Found - GET https://registry.npmjs.org/x",
      "npm error 404", "npm error A complete log of this run can be found in: /root/.npm/_logs/x.log"],
     "npm error code E404 / npm error 404 Not Found - GET https://registry.npmjs.org/x / npm error 404"),
    (["Traceback (most recent call last):", '  File "/a.py", line 1, in <module>', "    import nope",
      "ModuleNotFoundError: No module named 'nope'"], "ModuleNotFoundError: No module named 'nope'"),
    (["starting", "thread 'main' panicked at src/main.rs:2:5:", "  ", "no key"], "no key"),
    ([], ""),
    (["error: " + "e" * 400], "error: " + "e" * (agentlog.SAID_CHARS - 8) + "…"),
])
def test_what_names_why_an_agent_ended(said: list[str], words: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, stderr = read("".join(line + "\n" for line in said).encode(), [], monkeypatch)
    assert stderr.last_words() == words


def test_the_queue_is_bounded_and_counts_what_it_drops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agentlog._Writer, "_run", lambda self: None)  # a writer that never writes
    writer = agentlog._Writer()
    for n in range(agentlog.QUEUED_LINES + 10):
        writer.put(f"line {n}", 1)
    assert len(writer._queue) == agentlog.QUEUED_LINES and writer._dropped == 10
    big = agentlog._Writer()
    for _ in range(200):
        big.put("b" * MAX_LINE_BYTES, 1)
    assert big._bytes <= agentlog.QUEUED_BYTES and big._dropped == 200 - len(big._queue) > 0
    assert not writer.drain(0.05)  # what is queued is never waited on past the bound
