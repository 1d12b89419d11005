"""``liminal threads``: every thread the store knows, most recently active first; and what can be
done to one.

    liminal threads [--json] [--limit N] [--all]     # archived and empty threads only with --all
    liminal threads rename THREAD TITLE...
    liminal threads archive|unarchive THREAD
    liminal threads delete THREAD --yes              # everywhere: the store, the CLI's files, the cache
    liminal threads purge                            # what deleted threads left (``liminal doctor``)

A thread is listed once, however many sessions it moved through (swaps, ``/clear``, ``/undo``),
under its first title or the name the user gave it. An empty thread (no title, nothing said: a
session a client opened and never prompted) is left out unless ``--all``. THREAD is its id, a
session's it moved onto, or a unique prefix of either (``liminal.lookup.names``). A thread open
in a connection of ``liminal serve`` (its lock is held, ``liminal.serve.locks``) cannot be
deleted. A delete goes through ``liminal.kernel.owned``, as ``session/delete`` does:
everything the thread owns, in every part, with no proxy or agent running (the lineage from the
store and the swap journal, every CLI's harness for its files).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from liminal.commands._args import count
from liminal.config import Settings
from liminal.lookup.shown import cli_name

HELP = "list threads (title, CLI, cwd, turns, context, moves, activity); rename, archive, delete, purge"
ACTIONS = ("list", "rename", "archive", "unarchive", "delete", "purge")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", default="list", choices=ACTIONS, help="default: list")
    parser.add_argument("args", nargs="*", help="THREAD [TITLE...]")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--limit", type=count(), default=100, help="at most this many (default 100)")
    parser.add_argument("--all", action="store_true",
                        help="archived threads too, and empty ones (opened, never prompted)")
    parser.add_argument("--yes", action="store_true", help="delete without asking")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "purge":
        return _purge(args, settings)
    if args.action != "list":
        return _change(args, settings)
    from liminal.commands._store import print_json, run_with_store, when
    from liminal.store.records import ThreadSummary

    async def body(store: Any) -> list[ThreadSummary]:
        result: list[ThreadSummary] = await store.threads(limit=args.limit, empty=args.all)
        return result

    none: list[ThreadSummary] = []
    found = run_with_store(settings, body, not_yet=none)
    if found is None:
        return 1
    summaries = [s for s in found if args.all or s.thread.state != "archived"]
    if args.json:
        print_json([{
            "id": s.thread.id, "title": s.thread.title, "harness": s.thread.harness,
            "cwd": s.thread.cwd, "state": s.thread.state, "turns": s.turns,
            "context_used": s.context_used, "context_size": s.context_size,
            # Every move (liminal's swaps, /clear, /undo): "swaps" is the older name of the same.
            "moves": s.swaps, "swaps": s.swaps,
            "backing_ids": list(s.thread.backing_ids), "created": s.thread.created,
            "last_activity": s.last_activity} for s in summaries])
        return 0
    if not summaries:
        print("no threads yet" if not found else "no threads (archived ones: --all)")
        return 0
    from liminal.commands._out import Column, table
    from liminal.units import plural, tokens

    ids = short_ids([s.thread.id for s in summaries])
    rows = []
    for s in summaries:
        context = "-"
        if s.context_used is not None:
            context = tokens(s.context_used) + (f"/{tokens(s.context_size)}" if s.context_size else "")
        title = s.thread.title or "-"
        if s.thread.state == "archived":
            title += " (archived)"
        rows.append((ids[s.thread.id], title, cli_name(s.thread.harness), _home_short(s.thread.cwd),
                     str(s.turns), context, str(s.swaps), when(s.last_activity)))
    table([Column("THREAD", lead=True), Column("TITLE", fit="end", least=16, keep=1, lead=True),
           Column("CLI", label="{}"), Column("CWD", fit="start", least=12, label="{}"),
           Column("TURNS", right=True, label=lambda n: plural(int(n), "turn")),
           Column("CONTEXT", right=True, label="context {}"),
           Column("MOVES", right=True, label=lambda n: plural(int(n), "move")),
           Column("LAST ACTIVITY", label="last active {}")], rows)
    return 0


def short_ids(ids: list[str], least: int = 8) -> dict[str, str]:
    """Each id by its shortest prefix (``least`` characters at the fewest) that no other of
    ``ids`` shares: what ``liminal history`` and the other commands accept for the thread."""
    out = {}
    for thread_id in ids:
        n = least
        while n < len(thread_id) and any(o != thread_id and o.startswith(thread_id[:n]) for o in ids):
            n += 1
        out[thread_id] = thread_id[:n]
    return out


def _home_short(path: str) -> str:
    from pathlib import Path

    if not path:
        return "-"
    home = str(Path.home())
    return "~" + path[len(home):] if home not in ("", "/") and (path == home or path.startswith(home + "/")) else path


def _change(args: argparse.Namespace, settings: Settings) -> int:
    from liminal.commands._store import refuse, resolve, run_with_store
    from liminal.store.records import ARCHIVED, Batch, ThreadUpdate

    need = 2 if args.action == "rename" else 1
    blank = args.action == "rename" and not " ".join(args.args[1:]).strip()  # changes nothing
    if len(args.args) < need or blank or (args.action != "rename" and len(args.args) > 1):
        usage = "THREAD TITLE..." if args.action == "rename" else "THREAD"
        print(f"liminal threads {args.action}: give {usage}", file=sys.stderr)
        return 2
    if args.action == "delete" and not args.yes:
        print("liminal threads delete: this removes the thread everywhere: liminal's record of it "
              "(messages, frames, session lines, the model's summaries of it), the CLI's session files "
              "of it, its recalled text in the cache; add --yes to do it", file=sys.stderr)
        return 2

    async def body(store: Any) -> int:
        found = await resolve(store, args.args[0])
        if isinstance(found, list):
            return refuse(f"threads {args.action}", args.args[0], found)
        if args.action == "delete":
            from liminal.serve.locks import ThreadLocks
            from liminal.store.base import lock_root
            from liminal.store.cache import redis_url_of

            locks = ThreadLocks(lock_root(settings), redis_url_of(settings.cache.url))
            if not await locks.try_take(found):
                print(f"liminal threads delete: {found} is open in a live liminal (an editor's "
                      "liminal acp, a connection of liminal serve); close it first", file=sys.stderr)
                return 1
            try:
                removed = await _delete(settings, store, found)
                locks.remove(found)  # its lock file too, removed while held
            finally:
                await locks.release_all()
            print(f"deleted thread {found}: {removed.said()}")
            return _failed("delete", removed.failed)
        if args.action == "rename":
            title = " ".join(args.args[1:]).strip()
            update = ThreadUpdate(found, time.time(), title=title, named=True)
            done = f"renamed thread {found}: {title}"
        else:
            archive = args.action == "archive"
            thread = await store.thread(found)
            if thread is not None and (thread.state == ARCHIVED) == archive:
                print(f"thread {found} is {'already' if archive else 'not'} archived; nothing to do")
                return 0
            update = ThreadUpdate(found, time.time(), state=ARCHIVED if archive else "active", by_user=True)
            done = (f"archived thread {found} (liminal threads --all still lists it)" if archive
                    else f"unarchived thread {found}")
        await store.write(Batch(threads=[update]))
        print(done)
        return 0

    code = run_with_store(settings, body)
    return 1 if code is None else code


async def _delete(settings: Settings, store: Any, thread: str) -> Any:
    from liminal.kernel import owned

    async with owned.reached(settings, store) as holdings:
        claims = await owned.claimed(store, holdings.journal)
        return await holdings.remove(await owned.whose(thread, store, holdings.journal, claims))


def _failed(action: str, failed: dict[str, str]) -> int:
    """1 and a line on stderr for each part not reached; 0 when there is none."""
    for part, why in failed.items():
        print(f"liminal threads {action}: {part} not removed ({why}); "
              "`liminal threads purge` removes them once it can", file=sys.stderr)
    return 1 if failed else 0


def _purge(args: argparse.Namespace, settings: Settings) -> int:
    """What deleted threads left anywhere (``liminal.kernel.owned.purge``), removed."""
    from liminal.commands._store import run_with_store
    from liminal.kernel import owned

    if args.args:
        print("liminal threads purge: takes no THREAD (it removes what every deleted thread left)",
              file=sys.stderr)
        return 2

    async def body(store: Any) -> int:
        async with owned.reached(settings, store) as holdings:
            purged = await owned.purge(holdings)
        if not purged:
            print("nothing left of deleted threads")
            return 0
        failed: dict[str, str] = {}
        for whose, removed in purged:
            print(f"purged deleted thread {whose.thread}: {removed.said()}")
            failed |= removed.failed
        return _failed("purge", failed)

    code = run_with_store(settings, body, not_yet=-1)
    if code == -1:  # no store yet: no thread was ever deleted
        print("nothing left of deleted threads")
        return 0
    return 1 if code is None else code
