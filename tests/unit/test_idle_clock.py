"""The idle spells' clock (``liminal.faults.monotonic``): the wall's monotonic time, moved on by
the seconds a test writes in the ``clock.offset`` failpoint's file, so that a real-CLI test
passes minutes of idleness without waiting them (``Rig.advance_clock``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from liminal import faults


def test_unset_it_is_the_monotonic_clock() -> None:
    assert "clock.offset" not in faults._POINTS
    before = time.monotonic()
    assert before <= faults.monotonic() <= time.monotonic()
    assert faults.idle_look_seconds(15.0) == 15.0


def test_the_offset_file_moves_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = tmp_path / "clock"
    monkeypatch.setitem(faults._POINTS, "clock.offset", str(clock))
    assert faults.monotonic() <= time.monotonic()  # no file yet: no offset
    clock.write_text("360.0")
    before = time.monotonic()
    assert before + 360 <= faults.monotonic() <= time.monotonic() + 360
    clock.write_text("not a number")  # unreadable: no offset, never an error
    assert faults.monotonic() <= time.monotonic()
    assert faults.idle_look_seconds(15.0) == faults.OFFSET_LOOK_SECONDS
