"""Claude Code's large tool outputs, kept beside a session: ``<id>/tool-results/<name>``.

A tool output past about 30,000 characters (Claude Code 2.1.x) is written whole to
``projects/<encoded cwd>/<session id>/tool-results/<name>.txt`` before the model is sent it,
and the model is sent (and the session's ``tool_result`` line holds) only a preview that names
the file by its absolute path::

    <persisted-output>
    Output too large (38KB). Full output saved to: /…/<session id>/tool-results/<name>.txt

    Preview (first 2KB):
    …
    </persisted-output>

The name is the tool call's id in 2.1.44 (``toolu_….txt``), an id of the CLI's own in 2.1.316
(``bh6ttyhlx.txt``), so only the line says which file a call's output is in (docs/facts.md).
The model reads the file with its tools when it needs more than the preview, so a session
written again from the store needs its files too (``liminal.kernel.restore``), and recall of
such an output gives the file's text, not the preview.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from liminal.harness.base import Beside
from liminal.harness.claude.paths import config_dir
from liminal.harness.claude.records import loads
from liminal.sessionfiles import RewriteError, is_session_id, make_private_folder, write_atomically

FOLDER = "tool-results"
MARK = "<persisted-output>"
# The preview's first line names the file; what follows the session's folder is all a reader
# takes from it (the rest is this machine's folders, which differ on another).
_SAVED = re.compile(r"Full output saved to: (?P<path>[^\n]+)\n")
_FILE = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}"
_TAIL = re.compile(r"/(?P<session>[0-9a-fA-F-]{36})/tool-results/(?P<file>" + _FILE + ")$")
_NAME = re.compile(r"tool-results/" + _FILE)


def is_name(name: str) -> bool:
    """``tool-results/<file>``, a file name the CLI makes: nothing else becomes a path."""
    return _NAME.fullmatch(name) is not None and ".." not in name


def in_preview(text: str) -> Beside | None:
    """The file a ``<persisted-output>`` preview names, or None (not a preview, or a path of
    another form)."""
    if not text.startswith(MARK):
        return None
    saved = _SAVED.search(text, 0, 4096)
    if saved is None:
        return None
    tail = _TAIL.search(saved.group("path").rstrip())
    if tail is None or not is_session_id(tail.group("session")):
        return None
    name = f"{FOLDER}/{tail.group('file')}"
    return Beside(tail.group("session"), name) if is_name(name) else None


def _tool_result_texts(record: Any) -> Iterator[str]:
    message = record.get("message") if isinstance(record, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        inner = block.get("content")
        if isinstance(inner, str):
            yield inner
        elif isinstance(inner, list):
            yield from (b["text"] for b in inner
                        if isinstance(b, dict) and isinstance(b.get("text"), str))


def in_line(line: bytes) -> tuple[Beside, ...]:
    """The files the ``tool_result`` blocks of a session line preview, in order."""
    if MARK.encode() not in line:  # nearly every line: no parse
        return ()
    try:
        record = loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser takes
        return ()
    found = (in_preview(text) for text in _tool_result_texts(record))
    return tuple(dict.fromkeys(ref for ref in found if ref is not None))


def in_value(value: bytes) -> Beside | None:
    """The file a recalled tool output (its UTF-8) is only the preview of."""
    if not value.startswith(MARK.encode()):
        return None
    return in_preview(value[:4096].decode("utf-8", "replace"))


def path_of(ref: Beside, near: Path | None, env: Mapping[str, str] | None) -> Path | None:
    """Where the file is on this machine: beside the session file ``near`` (the same project
    folder: a rewrite's lines name its original's files, which sit beside it), else in any
    project folder; None when it is nowhere."""
    if not is_session_id(ref.session_id) or not is_name(ref.name):
        return None
    if near is not None:
        candidate = near.parent / ref.session_id / ref.name
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    projects = config_dir(env) / "projects"
    if projects.is_dir():
        for candidate in sorted(projects.glob(f"*/{ref.session_id}/{ref.name}")):
            if candidate.is_file() and not candidate.is_symlink():
                return candidate
    return None


def write_beside(folder: Path, files: Iterable[tuple[Beside, bytes]]) -> list[Path]:
    """Each file under ``folder`` (a project folder) as the CLI keeps it, byte for byte, 0600 in
    0700 folders, one at a time as ``files`` gives them; never over a file that is there. Raises
    ``ValueError`` for a name the CLI would not make (before writing that one)."""
    written = []
    for ref, data in files:
        if not is_session_id(ref.session_id) or not is_name(ref.name):
            raise ValueError(f"{ref.session_id}/{ref.name!r} is no tool output file of Claude Code")
        target = folder / ref.session_id / ref.name
        if target.exists() or target.is_symlink():
            continue
        make_private_folder(target.parent)
        try:
            write_atomically(target, (data,))
        except RewriteError:  # written meanwhile (the CLI, another load): the same file
            continue
        written.append(target)
    return written
