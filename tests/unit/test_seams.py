"""The narrow seams: the port's roles, the harness chosen at each use, and a wiring that hands
each component its collaborators in its constructor."""

from __future__ import annotations

from pathlib import Path

import pytest

from liminal import config
from liminal.acp import port
from liminal.config import GradientSettings
from liminal.harness import base
from liminal.harness.base import HarnessChoice, SessionHarness
from liminal.harness.codex.live import CodexSessions
from liminal.harness.known import known_harnesses

ROLES = (port.ThreadView, port.ThreadControl, port.ClientVoice, port.AgentLink, port.AgentLife)


def members(protocol: type) -> set[str]:
    return {name for klass in protocol.__mro__ if klass.__module__ == protocol.__module__
            for name in vars(klass) if not name.startswith("_")}


def test_the_port_is_its_roles_each_member_in_one() -> None:
    every = [name for role in ROLES for name in members(role)]
    assert len(every) == len(set(every))
    assert set(every) == members(port.Port)


def test_the_harness_roles_make_the_seam() -> None:
    roles = (base.SessionFiles, base.Rewriting, base.SideSessions, base.Recall, base.StoredSessions,
             base.Removal)
    assert set().union(*(members(role) for role in roles)) == members(SessionHarness)
    assert members(SessionHarness) == base.ChosenHarness.SEAM


def test_the_chosen_harness_is_the_choice_at_each_use() -> None:
    choice = HarnessChoice(known_harnesses(GradientSettings()), argv=["/opt/bin/my-agent"])
    harness = choice.harness
    assert harness.name == "claude"
    choice.agent_said({"name": "@agentclientprotocol/codex-acp"})
    assert harness.name == "codex" and harness.ceiling_tokens == CodexSessions.ceiling_tokens
    for name in base.ChosenHarness.SEAM - members(base.Recall):
        assert getattr(harness, name) == getattr(choice.current, name)
    with pytest.raises(AttributeError):
        harness.agent_said  # type: ignore[attr-defined]  # noqa: B018 - the choice's, not the seam's
    assert base.choice_behind(harness) is choice
    assert base.choice_behind(choice.current) is None


def test_every_component_gets_its_collaborators_when_built(tmp_path: Path) -> None:
    from liminal.kernel.commands import CommandCenter
    from liminal.kernel.modeltools import ModelTools
    from liminal.kernel.recalibrate import Recalibrator
    from liminal.kernel.recycle import Recycler
    from liminal.kernel.replay import ReplayManager
    from liminal.kernel.rewind import Rewinder
    from liminal.kernel.summaries import SideSummaries, side_root
    from liminal.kernel.swap import SwapManager
    from liminal.wiring import components

    settings = config.load(env={"LIMINAL_HOME": str(tmp_path)})
    found = components(settings)
    assert [type(c) for c in found] == [SwapManager, CommandCenter, SideSummaries, ModelTools,
                                        ReplayManager, Rewinder, Recycler, Recalibrator]
    swaps, commands, summaries, _, _, rewinder, _, recalibrator = found
    assert isinstance(swaps, SwapManager) and isinstance(commands, CommandCenter)
    assert isinstance(summaries, SideSummaries) and isinstance(rewinder, Rewinder)
    assert isinstance(recalibrator, Recalibrator)
    assert swaps.memory is commands.context.memory is rewinder.memory
    assert swaps.zone is not None and swaps.zone is commands.context.zone is summaries.zone
    assert swaps.policy.memory is settings.memory and summaries.memory is settings.memory
    assert summaries.settle == swaps.mover.settle
    assert commands.context.anchor_of == summaries.anchor and commands.context.rebuild_anchor == summaries.rebuild
    assert commands.context.side_root == side_root(settings.home) and commands.context.home == settings.home
    assert commands.context.recalibrated == recalibrator.settled
    assert swaps.summarizer_for("t") is None and not swaps.summary_asked("t", "b")
    # The swap manager sees each turn end before the summaries do.
    ends = swaps.model.on_turn_end
    assert ends.index(swaps._turn_ended) < ends.index(summaries._turn_ended)


def test_without_summaries_the_commands_have_no_anchor(tmp_path: Path) -> None:
    from liminal.kernel.commands import CommandCenter
    from liminal.wiring import components

    settings = config.load(env={"LIMINAL_HOME": str(tmp_path), "LIMINAL_SWAP_SUMMARIES": "false"})
    commands = components(settings)[1]
    assert isinstance(commands, CommandCenter)
    assert commands.context.rebuild_anchor is None and commands.context.side_root is None
    assert commands.context.anchor_of("t") is None
