"""Failpoints: named places where a test can make liminal fail or pause, in a real process.

The swap's failure paths must be shown against the real CLIs, in a separate liminal process,
deterministically. A failpoint is off unless ``LIMINAL_FAILPOINTS`` names it::

    LIMINAL_FAILPOINTS="swap.rewrite=error,swap.move=pause"

- ``error``: raise ``InjectedFault`` there.
- ``pause``: write ``<name>.reached`` into ``$LIMINAL_FAILPOINTS_DIR`` (default: the current
  directory) and wait there until cancelled (the swap's own timeout ends the wait), so a test
  can act at a known point, e.g. kill the adapter in the middle of a swap.
- ``hold``: write ``<name>.reached`` as ``pause`` does, then go on once the test has made
  ``<name>.release`` in the same folder (or until cancelled): a test acts
  while liminal is held there (sends a prompt; holds a second sidecar at the same point), then
  lets it go on.
- ``gate``: while the test has made ``<name>.closed`` in the same folder, write ``<name>.reached``
  and wait until that file is gone; with none there, go on at once. A test stops liminal at the
  next pass through a place (one with nothing half done), then lets it go on.
- anything else is passed to the caller as the failpoint's value (``swap.resume=wrong-id``).

Unset, a failpoint costs one dictionary lookup.

One more is a clock: ``clock.offset=PATH`` adds the seconds written in the file PATH (absent or
unreadable: none) to the monotonic time the swaps' idle spells are measured by (``monotonic``),
and has the idle watch look every ``OFFSET_LOOK_SECONDS``: a test moves liminal's idle time on by
minutes, as it moves the fake model's prompt cache, without waiting for them.

The swap's points, in order (``liminal.kernel.mover``): ``swap.rewrite`` (its ``begin`` is in
the journal, nothing written yet), ``swap.move`` (the rewrite is on disk, the agent not asked
yet; ``kill-agent`` kills the adapter there), ``swap.resume`` (``wrong-id``: the open names a
session the agent cannot have), ``swap.moved`` (the agent has the new session open, nothing
committed); with a shared store (MongoDB), ``swap.commit`` (the store's commit next) and
``swap.committed`` (committed in the store, nothing told to the local journal, the router or the
client yet); ``swap.corrupt_rewrite`` (a harness writes a rewrite its validator refuses). Before them all,
``swap.lease`` (a move of the held thread is about to ask for its lease in Redis). ``thread.lock``
(``error``: the lock of a thread a client opens cannot be taken, as when its folder is not
writable, which stops nothing: ``liminal.kernel.commands.opening.held_elsewhere``).
``index.round`` (the index worker between two rounds, no transaction open: ``gate`` holds a
worker that has fallen behind, as on a loaded machine).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio


class InjectedFault(RuntimeError):
    pass


def _parse(text: str) -> dict[str, str]:
    points: dict[str, str] = {}
    for item in text.split(","):
        name, _, value = item.strip().partition("=")
        if name:
            points[name] = value or "error"
    return points


_POINTS = _parse(os.environ.get("LIMINAL_FAILPOINTS", ""))


def value(name: str) -> str | None:
    return _POINTS.get(name)


async def hit(name: str) -> None:
    """Act on the failpoint ``name`` if it is set to ``error`` or ``pause``."""
    mode = _POINTS.get(name)
    if mode is None:
        return
    if mode == "error":
        raise InjectedFault(f"failpoint {name}")
    if mode == "hold":
        folder = anyio.Path(os.environ.get("LIMINAL_FAILPOINTS_DIR", "."))
        await folder.mkdir(parents=True, exist_ok=True)
        await (folder / f"{name}.reached").write_text(str(os.getpid()))
        while not await (folder / f"{name}.release").exists():  # noqa: ASYNC110 (a file the test makes)
            await anyio.sleep(0.02)
        return
    if mode == "gate":
        folder = anyio.Path(os.environ.get("LIMINAL_FAILPOINTS_DIR", "."))
        closed = folder / f"{name}.closed"
        if await closed.exists():
            await (folder / f"{name}.reached").write_text(str(os.getpid()))
            while await closed.exists():  # noqa: ASYNC110 (a file the test removes)
                await anyio.sleep(0.02)
        return
    if mode == "pause":
        folder = anyio.Path(os.environ.get("LIMINAL_FAILPOINTS_DIR", "."))
        await folder.mkdir(parents=True, exist_ok=True)
        await (folder / f"{name}.reached").write_text(str(os.getpid()))
        await anyio.sleep_forever()


OFFSET_LOOK_SECONDS = 0.1


def monotonic() -> float:
    """``time.monotonic()``, plus the seconds of the ``clock.offset`` file when it is set."""
    path = _POINTS.get("clock.offset")
    if path is None:
        return time.monotonic()
    try:
        offset = float(Path(path).read_text() or 0)
    except (OSError, ValueError):
        offset = 0.0
    return time.monotonic() + offset


def idle_look_seconds(seconds: float) -> float:
    """How long the idle watch waits between looks: ``seconds``, or a moment when a test drives
    the clock."""
    return OFFSET_LOOK_SECONDS if "clock.offset" in _POINTS else seconds
