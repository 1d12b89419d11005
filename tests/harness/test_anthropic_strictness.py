"""The fake Messages API refuses what the real one refuses, with the real wording."""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.harness import ApiError, check_messages, sign_thinking


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}


def result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


def thinking(value: str, signature: str | None = None) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value,
            "signature": sign_thinking(value) if signature is None else signature}


def refusal(messages: Any) -> str:
    with pytest.raises(ApiError) as info:
        check_messages(messages)
    assert info.value.status == 400
    return info.value.message


def test_a_valid_tool_conversation_passes() -> None:
    check_messages([
        user(text("list files")),
        assistant(thinking("let me look"), text("looking"), use("toolu_1"), use("toolu_2")),
        user(result("toolu_2"), result("toolu_1"), text("and?")),  # order of results is free
        assistant(text("done")),
        user(text("thanks")),
    ])


def test_plain_string_content_and_a_final_empty_assistant_prefill_pass() -> None:
    check_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}])


def test_tool_use_without_result_in_the_next_message() -> None:
    message = refusal([
        user(text("go")), assistant(use("toolu_a"), use("toolu_b")), user(result("toolu_a")),
    ])
    assert message == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_b. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message."
    )


def test_tool_result_one_message_too_late() -> None:
    message = refusal([
        user(text("go")), assistant(use("toolu_a")), user(text("wait")),
        assistant(text("ok")), user(result("toolu_a")),
    ])
    assert message.startswith("messages.1: `tool_use` ids were found without `tool_result`")


def test_tool_result_without_its_tool_use() -> None:
    message = refusal([user(text("go")), assistant(text("hm")), user(text("x"), result("toolu_z"))])
    assert message == (
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_z. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message."
    )


def test_tool_result_in_the_first_message() -> None:
    assert refusal([user(result("toolu_z"))]).startswith(
        "messages.0.content.0: unexpected `tool_use_id`")


def test_roles_must_alternate() -> None:
    assert refusal([user(text("a")), user(text("b"))]) == (
        'messages: roles must alternate between "user" and "assistant", but found multiple '
        '"user" roles in a row'
    )
    assert refusal([user(text("a")), assistant(text("b")), assistant(text("c"))]).endswith(
        'found multiple "assistant" roles in a row')


def test_first_message_is_the_users() -> None:
    assert refusal([assistant(text("a"))]) == 'messages: first message must use the "user" role'


def test_unknown_role() -> None:
    assert refusal([user(text("a")), {"role": "tool", "content": "x"}]) == (
        "messages.1.role: Input should be 'user' or 'assistant'")


def test_mid_conversation_system_message_is_transparent() -> None:
    # Claude Code 2.1.316 puts its environment block in a `system` message after the first one.
    check_messages([
        user(text("go")), {"role": "system", "content": [text("# Environment")]},
        assistant(use("toolu_1")), {"role": "system", "content": "note"},
        user(result("toolu_1")),
    ])


def test_empty_content() -> None:
    assert refusal([user(text("a")), assistant(), user(text("b"))]) == (
        "messages.1: all messages must have non-empty content except for the optional final "
        "assistant message"
    )
    assert refusal([{"role": "user", "content": ""}]).startswith("messages.0: all messages")


def test_empty_text_block() -> None:
    assert refusal([user(text(""))]) == (
        "messages.0.content.0.text: text content blocks must be non-empty")


def test_altered_thinking_is_refused() -> None:
    signed = thinking("the original thought")
    tampered = {**signed, "thinking": "an edited thought"}
    assert refusal([user(text("a")), assistant(tampered, text("b")), user(text("c"))]) == (
        "messages.1.content.0: Invalid `signature` in `thinking` block")


def test_thinking_with_a_foreign_signature_is_refused() -> None:
    forged = thinking("a thought", signature="RXJyb3I=")
    assert "Invalid `signature`" in refusal([user(text("a")), assistant(forged, text("b"))])


def test_not_a_list() -> None:
    with pytest.raises(ApiError):
        check_messages({"role": "user"})
