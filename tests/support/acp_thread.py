"""A thread driven through ``liminal acp`` with the real CLIs, for the acceptance tests that move
one (``test_one_thread``, ``test_undo``, ``test_dashboard``): the scripted model's BIG turns, the
swap settings that make them move, a client closed so that the index worker has stored every
frame, a prompt answered, and the ``liminal`` command against the rig's home."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

from fixtures.harness import AcpClient, Rig, Scenario, Shell
from liminal.kernel.journal import SwapJournal, SwapRecord

FIRST = "alpha topic first prompt"
BIG = [f"turn {n}: BIG read please" for n in range(30)]


def scenario() -> Scenario:
    """A prompt holding ``BIG`` reads 2,001 lines (about 3-5k tokens a turn)."""
    return Scenario().add("BIG", Shell("seq 10000 12000", "Read a lot"), "read it")


def configure(rig: Rig, *, high: int, target: int, middle: int = 600) -> None:
    """liminal's config in the rig's home: the swap's trigger and target ``high`` and ``target``
    tokens over the CLI's own prompt, a small gradient (recent and summary 600 tokens) with a
    middle band of ``middle``."""
    base = rig.overhead()
    rig.home.liminal_home.mkdir(parents=True, exist_ok=True)
    (rig.home.liminal_home / "config.toml").write_text(
        f"[swap]\nhigh_tokens = {base + high}\ntarget_tokens = {base + target}\nhold_timeout_seconds = 60\n"
        f"[gradient]\nrecent_tokens = 600\nmiddle_tokens = {middle}\nsummary_tokens = 600\n")


@contextlib.contextmanager
def liminal_client(rig: Rig) -> Iterator[AcpClient]:
    """A client of ``liminal acp``, closed by closing its input and waiting for liminal to exit:
    its index worker has then stored every frame (the client's default close signals the
    process group after a second, which on a busy machine cut the worker's last batch off)."""
    n = len(rig.clients)
    client = AcpClient(rig.home.liminal_argv(), rig.home.env(), rig.home.project,
                       rig.home.logs / f"stderr-{n}-liminal.log")
    rig.clients.append(client)
    try:
        yield client
    finally:
        client.close(grace=60)


def said(client: AcpClient, thread: str, text: str) -> str:
    result = client.prompt(thread, text, timeout=180)
    assert result.stop_reason == "end_turn", text
    return result.text


def records(rig: Rig) -> list[SwapRecord]:
    return SwapJournal(rig.home.liminal_home / "swaps.jsonl").records()


def committed(rig: Rig) -> list[SwapRecord]:
    return [r for r in records(rig) if r.outcome == "committed"]


def liminal(rig: Rig, *args: str) -> str:
    """The ``liminal`` command, as a person runs it against the rig's home."""
    done = subprocess.run([sys.executable, "-m", "liminal", *args], env=rig.home.env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout
