"""``liminal doctor [-- AGENT_COMMAND...]``: is everything liminal needs in order? One line a check.

It changes nothing (a store that does not exist is not created; a home that is too open is
reported, not fixed: ``liminal acp`` tightens it at its next start).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import stat
import sys
from typing import TYPE_CHECKING

from liminal.config import Settings

if TYPE_CHECKING:
    from liminal.store.base import Census

HELP = ("check the home folder, the store, the cache, records set aside, what deleted threads "
        "left and the agent command; one line each")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", nargs=argparse.REMAINDER, help="-- AGENT_COMMAND (optional)")


# How each backend searches, as a person reads it (the fallbacks are slower on a large store).
SEARCH_MODES = {
    "fts5": "full-text index (FTS5)",
    "like": "scanning with LIKE (this SQLite has no FTS5)",
    "text-index": "text index",
    "regex": "scanning with regular expressions (the server has no text indexes)",
}


def _home(settings: Settings) -> tuple[bool, str]:
    home = settings.home
    if not home.exists():
        return True, f"{home} does not exist yet (liminal acp creates it, 0700)"
    mode = stat.S_IMODE(home.stat().st_mode)
    if mode & 0o077:
        return False, f"{home} is {mode:04o}: readable by others (liminal acp makes it 0700)"
    loose = [p for p in home.rglob("*") if not p.is_symlink()
             and stat.S_IMODE(p.stat().st_mode) & 0o077]
    if len(loose) == 1:
        # Most often a config.toml made with an editor or a shell (0644 under the usual umask);
        # it may hold a store's or a cache's password in its URL.
        mode = stat.S_IMODE(loose[0].stat().st_mode)
        return False, (f"{loose[0]} is {mode:04o}: readable by others; fix with "
                       f"chmod 600 {shlex.quote(str(loose[0]))}")
    if loose:
        return False, (f"{len(loose)} files in {home} are readable by others, e.g. {loose[0]}; "
                       f"fix with chmod -R go= {shlex.quote(str(home))}")
    return True, f"{home} is private (0700)"


def _clis() -> list[tuple[str, bool, str]]:
    """Which CLIs and adapters are on PATH, and where their session files are."""
    from liminal.harness.claude.paths import config_dir
    from liminal.harness.codex.rollout import codex_home
    from liminal.harness.gemini.chatfile import gemini_dir

    out: list[tuple[str, bool, str]] = []
    for name, programs, folder in (
        ("claude", ("claude", "claude-agent-acp", "claude-code-acp"), config_dir(None) / "projects"),
        ("codex", ("codex", "codex-acp"), codex_home() / "sessions"),
        ("gemini", ("gemini",), gemini_dir() / "tmp"),
    ):
        found = [f"{p} ({shutil.which(p)})" for p in programs if shutil.which(p)]
        sessions = (f"sessions in {folder}" if folder.is_dir()
                    else f"no sessions yet ({folder} does not exist)")
        text = ("on PATH: " + ", ".join(found) if found else
                "no CLI or adapter on PATH (fine when the editor runs it through npx)") + f"; {sessions}"
        out.append((name, True, text))
    return out


def _fts5() -> tuple[bool, str]:
    import sqlite3

    try:
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        db.close()
    except sqlite3.OperationalError:
        return False, (f"SQLite {sqlite3.sqlite_version} has no FTS5: search falls back to scanning; "
                       "install a Python built against a full SQLite")
    return True, f"SQLite {sqlite3.sqlite_version} with FTS5"


def _quarantine(settings: Settings) -> tuple[bool, str]:
    """Records the store refused even cut, set aside whole (``liminal.ingest.quarantine``): the
    store lacks them until a person looks (docs/operations.md, "A record the store cannot take")."""
    from liminal.ingest.quarantine import listing

    found = listing(settings.home)
    if not found:
        return True, "nothing set aside"
    return False, (f"{len(found)} record{'s' if len(found) != 1 else ''} the store refused "
                   f"set aside in {found[0].parent}, the latest {found[-1].name} "
                   "(docs/operations.md, \"A record the store cannot take\")")


def _token(settings: Settings) -> tuple[bool, str]:
    from liminal.access import TOKEN_FILE

    path = settings.home / TOKEN_FILE
    if not path.exists():
        return True, f"{path}: none yet (liminal serve makes it, 0600)"
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return False, f"{path} is {oct(mode)}: fix with chmod 600 {path} (or delete it for a new one)"
    return True, f"{path} is 0600"


def _megabytes(n: int) -> str:
    return f"{n / 1_000_000:,.1f} MB" if n >= 100_000 else f"{n / 1000:,.0f} kB"


# Free space worth a VACUUM: less is what any deletion leaves, and the store reuses it.
WASTED_BYTES = 32_000_000


def store_size(census: Census) -> tuple[bool, str]:
    """The store's size against its threads, and whether it is much larger than they warrant:
    message rows that repeat a thread's history (what older liminals stored at every load, which
    the index worker compacts at its next start), or a file mostly free (deleted records leave
    their space in SQLite's file until VACUUM)."""
    from liminal.units import plural

    size = "size unknown" if census.bytes is None else _megabytes(census.bytes)
    text = (f"{size}, {plural(census.threads, 'thread')}, {plural(census.messages, 'message')} "
            f"({census.repeated:,} repeated)")
    if census.repeated:
        return False, (f"{text}: loads stored threads' history again; the next liminal acp "
                       "compacts them (docs/operations.md, \"The store's size\")")
    if census.bytes and census.free * 2 > census.bytes and census.free >= WASTED_BYTES:
        return False, (f"{text}; {_megabytes(census.free)} of it is free space deleted records "
                       "left (docs/operations.md, \"The store's size\")")
    if census.free >= 100_000:  # a delete's pages, which the store fills again as it grows
        return True, f"{text}; {_megabytes(census.free)} of it free"
    return True, text


async def _deleted_left(settings: Settings) -> tuple[bool, str]:
    """What deleted threads left in any part (``liminal.kernel.owned.leftovers``): a file the
    CLI wrote again, a cache a delete could not reach, an older liminal's delete. Counted only."""
    import anyio

    from liminal.kernel import owned
    from liminal.store.configured import open_store

    try:
        with anyio.fail_after(30):
            async with open_store(settings, create=False) as store, owned.reached(settings, store) as holdings:
                tombstones = await store.deleted_threads()
                found = await owned.leftovers(holdings)
    except Exception as exc:  # the store's own line says why
        if "no store at" in str(exc):
            return True, "no thread deleted (no store yet)"
        return True, "not looked at: the store cannot be read (its line says why)"
    left = [(whose, counts) for whose, counts in found if any(counts.counts.values())]
    unseen = sorted({part for _, counts in found for part in counts.failed})
    if not left:
        said = (f"nothing left of {len(tombstones)} deleted thread{'s' if len(tombstones) != 1 else ''}"
                if tombstones else "no thread deleted")
        return True, said + (f" (not looked in: {', '.join(unseen)})" if unseen else "")
    total = owned.Removed()
    for _, counts in left:
        total.merge(counts)
    what = total.said()
    return False, (f"{len(left)} deleted thread{'s' if len(left) != 1 else ''} left {what}, "
                   f"e.g. {left[0][0].thread}: `liminal threads purge` removes them")


def run(args: argparse.Namespace, settings: Settings) -> int:
    import anyio

    from liminal.commands.config import shown
    from liminal.config import setting_names, value_of
    from liminal.errors import in_words
    from liminal.store.base import StoreError, describe
    from liminal.store.cache import open_cache
    from liminal.store.configured import open_store

    checks: list[tuple[str, bool, str]] = []
    checks.append(("home", *_home(settings)))
    changed = [f"{n} = {shown(n, value_of(settings, n))}" for n in setting_names()
               if value_of(settings, n) != value_of(Settings(home=settings.home), n)]
    checks.append(("config", True, ("not the defaults: " + ", ".join(changed)) if changed else "all defaults"))
    checks.append(("sqlite", *_fts5()))
    checks.append(("token", *_token(settings)))
    checks.append(("aside", *_quarantine(settings)))
    checks.extend(_clis())

    sizes: list[tuple[bool, str]] = []

    async def store_check() -> tuple[bool, str]:
        try:
            with anyio.fail_after(10):
                async with open_store(settings, create=False) as store:
                    threads = await store.threads(limit=1)
                    mode = SEARCH_MODES.get(store.search_mode, store.search_mode)
                    try:
                        sizes.append(store_size(await store.census()))
                    except StoreError as exc:
                        sizes.append((False, f"not measured: {str(exc).splitlines()[0][:200]}"))
            return True, (f"{describe(settings)} opens ({'has threads' if threads else 'empty'}); "
                          f"search: {mode}")
        except StoreError as exc:
            if "no store at" in str(exc):
                return True, f"{describe(settings)}: none yet (created by the first liminal acp)"
            return False, f"{describe(settings)}: {str(exc).splitlines()[0][:200]}"
        except TimeoutError:
            return False, f"{describe(settings)}: no answer within 10 s"
        except Exception as exc:
            return False, f"{describe(settings)}: {in_words(exc)}"

    async def cache_check() -> tuple[bool, str]:
        where = settings.cache.url or f"files in {settings.home / 'cache'}"
        if not settings.cache.url:
            return True, where
        try:
            async with open_cache(settings) as cache:
                ping = getattr(cache, "ping", None)
                ok = bool(await ping()) if ping is not None else True
            return ok, f"{where} {'answers' if ok else 'does not answer'}"
        except Exception as exc:
            return False, f"{where}: {in_words(exc)}"

    async def both() -> None:
        checks.append(("store", *await store_check()))
        checks.extend(("size", *found) for found in sizes)
        checks.append(("cache", *await cache_check()))
        checks.append(("delete", *await _deleted_left(settings)))

    anyio.run(both, backend="asyncio")
    agent = [a for a in args.agent if a != "--"] if args.agent else []
    if agent:
        found = shutil.which(agent[0])
        checks.append(("agent", found is not None,
                       f"{agent[0]} -> {found}" if found else f"{agent[0]}: not found on PATH"))
    from liminal.commands._out import Transcript

    out = Transcript()  # a check a line; a long finding wraps under itself
    for name, ok, text in checks:
        out.line(f"{'ok     ' if ok else 'PROBLEM'}  {name:<6} {text}", hang=16,
                 style="" if ok else "bold red")
    bad = [name for name, ok, _ in checks if not ok]
    if bad:
        print(f"liminal doctor: {len(bad)} problem(s): {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0
