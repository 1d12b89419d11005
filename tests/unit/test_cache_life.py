"""``cache_life``: how long a session's prompt cache lives unused, as the CLI's files say (issue 24).

Claude Code copies the Messages API's usage into each assistant line, with
``cache_creation: {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}`` (2.1.316 writes the
field, zeros when the server sends none; 2.1.44 writes the server's usage as it came). Codex's
rollouts count cached tokens but say nothing of their life (docs/facts.md, "The prompt cache's
life")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liminal.config import GradientSettings
from liminal.harness.claude.live import ClaudeSessions
from liminal.harness.claude.tail import TAIL_BYTES, cache_life, context_tokens
from liminal.harness.codex.live import CodexSessions
from tests.support.codex_rollouts import RolloutBuilder, TurnSpec


def write(path: Path, *records: Any, torn: bytes = b"") -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + torn)
    return path


def call(five: int = 0, hour: int = 0, read: int = 1000, **extra: Any) -> dict[str, Any]:
    """An assistant line as Claude Code 2.1.316 writes it: the server's usage, ``cache_creation``
    included."""
    usage = {"input_tokens": 3, "cache_creation_input_tokens": five + hour,
             "cache_read_input_tokens": read, "output_tokens": 5,
             "cache_creation": {"ephemeral_1h_input_tokens": hour, "ephemeral_5m_input_tokens": five}}
    return {"type": "assistant", "uuid": f"a{five}-{hour}-{read}",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "usage": usage},
            **extra}


USER = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}


def test_the_newest_call_that_wrote_says_the_life(tmp_path: Path) -> None:
    assert cache_life(write(tmp_path / "h.jsonl", USER, call(five=500), USER, call(hour=40))) == 3600.0
    assert cache_life(write(tmp_path / "f.jsonl", USER, call(hour=500), USER, call(five=40))) == 300.0
    assert cache_life(write(tmp_path / "b.jsonl", USER, call(five=10, hour=10))) == 3600.0


def test_a_call_that_only_read_the_cache_says_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", USER, call(hour=900), USER, call(read=5000),
                 {"type": "last-prompt"}, {"type": "cost-state"})
    assert cache_life(path) == 3600.0


def test_sidechain_calls_are_not_the_conversations_cache(tmp_path: Path) -> None:
    # A subagent's calls have a life of their own (CLAUDE_CODE_SUBAGENT_PROMPT_CACHE_TTL).
    path = write(tmp_path / "s.jsonl", USER, call(five=900), call(hour=50, isSidechain=True))
    assert cache_life(path) == 300.0


def test_a_line_nested_past_the_parsers_depth_is_passed_over(tmp_path: Path) -> None:
    """orjson refuses it and the stdlib's parser recursed out of its depth: a RecursionError,
    which took the reading, and with it the swap manager's look beside the turns, down."""
    deep = b'{"type":"assistant","message":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    path = tmp_path / "s.jsonl"
    path.write_bytes(json.dumps(call(five=80)).encode() + b"\n" + deep)
    assert cache_life(path) == 300.0
    assert context_tokens(path) == 1083


def test_nothing_says_when_no_call_wrote_or_the_usage_has_no_split(tmp_path: Path) -> None:
    assert cache_life(write(tmp_path / "e.jsonl")) is None
    assert cache_life(write(tmp_path / "u.jsonl", USER)) is None
    assert cache_life(write(tmp_path / "z.jsonl", USER, call(read=0))) is None  # 2.1.316 against a server without the field
    older = {"type": "assistant", "message": {"usage": {  # Claude Code 2.1.44, a server without the field
        "input_tokens": 3, "cache_creation_input_tokens": 700, "cache_read_input_tokens": 0, "output_tokens": 1}}}
    assert cache_life(write(tmp_path / "o.jsonl", USER, older)) is None


def test_a_rewrite_and_a_compaction_do_not_hide_the_calls_before_them(tmp_path: Path) -> None:
    """The life is the account's and the CLI's, not the context's: usage a rewrite carried over
    (stale as a context size) and usage before a compaction still say it."""
    path = write(tmp_path / "r.jsonl",
                 {"type": "liminal-rewrite", "lastRecordUuid": "a0-900-1000", "tokensAfter": 4000},
                 {"type": "system", "subtype": "compact_boundary"}, USER, call(hour=900), USER)
    assert context_tokens(path) == 4000
    assert cache_life(path) == 3600.0


def test_bad_lines_are_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(json.dumps(call(five=80)).encode() + b"\n" + b"not json\n[1, 2]\n\xff\xfe\n"
                     + json.dumps({"type": "assistant", "message": "text"}).encode() + b"\n"
                     + json.dumps({"type": "assistant", "message": {"usage": {"cache_creation": {
                         "ephemeral_1h_input_tokens": True, "ephemeral_5m_input_tokens": "9"}}}}).encode()
                     + b"\n" + b'{"type":"assistant","message":{"usage":{"cache_creation":{"ephemeral_1h')
    assert cache_life(path) == 300.0


def test_the_search_reaches_past_one_tail_but_stays_bounded(tmp_path: Path) -> None:
    """As far back as ``context_tokens`` looks (eight tails), and no further."""
    filler = {"type": "user", "message": {"role": "user", "content": "x" * 10_000}}
    near = write(tmp_path / "n.jsonl", USER, call(hour=900),
                 *[filler] * (2 * TAIL_BYTES // 10_000), call(read=9))
    assert cache_life(near) == 3600.0
    far = write(tmp_path / "f.jsonl", USER, call(hour=900), *[filler] * (9 * TAIL_BYTES // 10_000))
    assert cache_life(far) is None


def test_claude_sessions_answers_it(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", USER, call(five=120))
    assert ClaudeSessions(GradientSettings(), env={}).cache_life(path) == 300.0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "message", "usage", "cache_creation", "ephemeral_1h_input_tokens",
                         "ephemeral_5m_input_tokens", "isSidechain", "uuid", "content", "subtype",
                         "lastRecordUuid", "tokensAfter", "input_tokens"]) | st.text(max_size=4),
        inner, max_size=5),
    max_leaves=20)
RECORD = st.one_of(JSON, st.builds(lambda m: {"type": "assistant", "message": m}, JSON),
                   st.builds(lambda u: {"type": "assistant", "message": {"usage": u}}, JSON),
                   st.builds(lambda c: {"type": "assistant", "message": {"usage": {"cache_creation": c}}}, JSON))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(RECORD, max_size=6), torn=st.binary(max_size=20))
def test_any_json_in_any_field_is_an_answer_not_an_error(tmp_path: Path, records: list[Any], torn: bytes) -> None:
    """Bad input never crashes the proxy: whatever a line holds, the answer is one of three."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + torn)
    assert cache_life(path) in (None, 300.0, 3600.0)


def test_codex_rollouts_do_not_say(tmp_path: Path) -> None:
    """Both dialects count cached tokens (0.166: ``cache_write_input_tokens`` too) and none
    says for how long: None, whatever the usage holds."""
    for dialect in ("0.137", "0.166"):
        builder = RolloutBuilder(dialect).turn(TurnSpec("hello"))
        counts = [line["payload"] for line in builder.lines if line["payload"].get("type") == "token_count"]
        counts[-1]["info"]["last_token_usage"].update({"cached_input_tokens": 9000,
                                                       "cache_write_input_tokens": 400})
        path = builder.write(tmp_path / dialect)
        assert CodexSessions(GradientSettings(), env={"CODEX_HOME": str(tmp_path / dialect)}).cache_life(path) is None


def test_the_harness_choice_asks_the_chosen_cli(tmp_path: Path) -> None:
    from liminal.harness.base import HarnessChoice

    path = write(tmp_path / "s.jsonl", USER, call(hour=120))
    factories = {"claude": lambda: ClaudeSessions(GradientSettings(), env={}),
                 "codex": lambda: CodexSessions(GradientSettings(), env={})}
    assert HarnessChoice(factories).harness.cache_life(path) == 3600.0
    assert HarnessChoice(factories, forced="codex").harness.cache_life(path) is None
