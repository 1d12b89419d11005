"""The liminal the rig and the tests start: the model's summaries (``swap.summaries``, on for a
user) off unless a test asks for them (``fixtures/harness/adapters.py``, ``SUMMARIES_OFF``), since
a side session's model requests would take the replies scripted for the conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.harness import SUMMARIES_ON, FakeAnthropic, FakeResponses, Home, adapters
from liminal import config
from tests.support.proxy_process import child_env


def test_the_rig_starts_liminal_without_the_models_summaries_unless_asked(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_responses: FakeResponses,
) -> None:
    for adapter in adapters().values():
        server = fake_anthropic if adapter.model_api == "anthropic" else fake_responses
        home = Home.create(tmp_path / adapter.name, adapter, server)
        home.liminal_home.mkdir(parents=True)
        # The environment beats the config file: a test's own config cannot turn them on unseen.
        (home.liminal_home / "config.toml").write_text("[swap]\nsummaries = true\n")
        assert config.load(env=home.env()).swap.summaries is False, adapter.name
        assert config.load(env={**home.env(), **SUMMARIES_ON}).swap.summaries is True


def test_the_tests_start_liminal_without_the_models_summaries_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pytest's own environment (``tests/conftest.py``): what ``child_env`` gives ``liminal acp``,
    ``liminal serve`` and the dashboard, and what a command run in-process reads."""
    assert config.load(env=child_env(tmp_path)).swap.summaries is False
    assert config.load(env=child_env(tmp_path, **SUMMARIES_ON)).swap.summaries is True
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    assert config.load().swap.summaries is False
