"""``liminal acp`` started by a person at a terminal rather than by a client: it said nothing and
waited (found trying the README's first command as a new user). It says what it waits for, and
where to try liminal without an editor; Ctrl-D (the end of its input) ends it as ever."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from tests.support.proxy_process import child_env, liminal_argv, scripted_agent_argv


def test_it_says_what_it_waits_for(tmp_path: Path) -> None:
    parent, child = pty.openpty()
    proc = subprocess.Popen(liminal_argv(scripted_agent_argv()), stdin=child, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env(tmp_path))
    os.close(child)
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline().decode()
        assert "waiting for an ACP client on stdin" in said and "Try it without an editor" in said, said
        os.write(parent, b"\x04")  # Ctrl-D: the end of the input, on a terminal
        assert proc.wait(60) == 0
    finally:
        os.close(parent)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
