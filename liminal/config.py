"""One settings object, built in one place.

Precedence, lowest first: the defaults below < ``$LIMINAL_HOME/config.toml`` < ``LIMINAL_*``
environment variables < command-line flags. Every setting has one dotted name
(``swap.high_tokens``) that is also its TOML key (``[swap] high_tokens = ...``) and, upper-cased
with ``_`` for the dot, its environment variable (``LIMINAL_SWAP_HIGH_TOKENS``). Top-level
settings have no section (``log_level`` -> ``LIMINAL_LOG_LEVEL``).

Sections are frozen dataclasses so a component receives only the part it needs, and nothing
can change a setting behind another component's back.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
LOG_LEVELS = ("debug", "info", "warning", "error")


class ConfigError(ValueError):
    """A setting could not be read or has a value of the wrong type."""


@dataclass(frozen=True, slots=True)
class ProxySettings:
    # Large enough for a prompt carrying several base64 images; a line beyond it is refused.
    max_frame_bytes: int = 64 * MiB
    # The older Claude adapter ignores stdin EOF, so after the client leaves we signal its group.
    kill_grace_seconds: float = 5.0
    # When liminal stops (the client closed its input, a signal), a swap under way (or decided at
    # the turn end the client's leaving followed) is given this long to finish before the agent is
    # stopped: a client that starts liminal for every prompt closes it right after the answer,
    # the moment a swap begins. Past it, the swap is abandoned and its rewrite removed; the
    # thread's next load decides again (``liminal.kernel.swap``). 0: abandoned at once.
    stop_grace_seconds: float = 10.0
    # Frames a tap subscriber may fall behind before it starts losing them (see docs/architecture).


@dataclass(frozen=True, slots=True)
class StoreSettings:
    # Empty means the embedded default: SQLite at $LIMINAL_HOME/liminal.db.
    url: str = ""
    # Frames the indexer may queue in memory before it spills to the local spool.
    queue_frames: int = 100_000
    # Record every frame (``liminal acp``). Off: a pure proxy, nothing written anywhere.
    index: bool = True
    # "worker": a separate process indexes what the proxy spools (the default: forwarding keeps
    # its speed); "inline": the indexer runs in the proxy's own process.
    indexer: str = "worker"


@dataclass(frozen=True, slots=True)
class CacheSettings:
    # Empty means the local fallback (files under $LIMINAL_HOME/cache).
    url: str = ""
    ttl_seconds: int = 7 * 24 * 3600


# The preamble is never given less than this (a summary shorter says too little to be worth its
# place), unless ``summary_tokens`` itself is smaller. Here, beside the settings, because both
# the gradient's budgets (``liminal.gradient.bands``) and the check of the settings read it.
PREAMBLE_MIN_TOKENS = 1_000


@dataclass(frozen=True, slots=True)
class GradientSettings:
    # The context the gradient aims for after a rewrite.
    target_tokens: int = 100_000
    # Budgets of the bands, youngest first. The recent band is kept byte for byte (at least the
    # last turn); under a target it holds no more than fits there with the preamble. Whole, it
    # is the floor the swap's cost policy cuts to: 20k with a 4k preamble, the most that still
    # costs well under Claude Code's own compaction (docs/gradient.md, "The swap's defaults").
    recent_tokens: int = 20_000
    # The floor's recent band on a thread whose prompt cache lives longer than 5 minutes (Claude
    # Code's 1-hour cache, where every cache write, so every swap's rebuild, costs 2x rather than
    # 1.25x): 10k, measured (docs/gradient.md, "Cache lives"). Not under swap.target_tokens, which
    # sets the context itself. Unset while recent_tokens is set: that one band at every cache life.
    long_cache_recent_tokens: int = 10_000
    middle_tokens: int = 40_000
    # Tool output in the middle band is cut to this many characters (and a few first lines).
    truncate_chars: int = 120
    truncate_lines: int = 2
    # The preamble that consolidates the ancient band is written to fit this budget.
    summary_tokens: int = 4_000
    # The dynamic zone: memos and cut passages that match the recent turns, placed by a swap
    # between the compressed history and the recent band, in at most this many tokens (under a
    # target, only what the rewrite leaves under it). 0: no zone (docs/gradient.md).
    zone_tokens: int = 1_000

    def with_recent(self, recent_tokens: int | None) -> GradientSettings:
        """These settings with a thread's recent band (the swap policy's, by its cache's life;
        ``SessionHarness.rewrite``), or as they are (None)."""
        return self if recent_tokens is None else dataclasses.replace(self, recent_tokens=recent_tokens)


@dataclass(frozen=True, slots=True)
class SwapSettings:
    enabled: bool = True
    # Swap once the context passes high_tokens, aiming for target_tokens after the rewrite.
    # Unset (the default), the prompt cache's economics choose them per thread
    # (``liminal.kernel.policy``): the target is as deep as the gradient goes with its recent band
    # whole, the trigger where the cache rebuild pays for itself best. Set, they are obeyed.
    high_tokens: int | None = None
    target_tokens: int | None = None
    # The model's prompt cache lives this long unused (Anthropic: 300 s, or 3600 s with the
    # longer cache) until the CLI's own records of a thread say which it got (Claude Code's
    # usage names the cache it wrote; Codex's says nothing). A thread idle past it has lost its
    # cache anyway: a swap then is nearly free. 0: no idle swaps. It times idle swaps only: a
    # thread's writes are priced at the hour's cache (2x) when its records say so, never by this.
    cache_life_seconds: float = 300.0
    # The context no thread may reach (unset: the CLI's own auto-compaction point, from the
    # harness). The chosen trigger stays a turn below it.
    ceiling_tokens: int | None = None
    # Also swap every N turns (0: never for that reason alone).
    every_turns: int = 0
    # How the UI hears about a swap: "silent", "thought" or "info".
    notice: str = "thought"
    # Prompts wait at most this long for a swap; after it the swap is abandoned.
    hold_timeout_seconds: float = 30.0
    # An agent that cannot close sessions keeps every session a swap left, each a CLI process;
    # past this many, liminal moves the live ones to a fresh agent process at a quiet moment.
    max_stale_sessions: int = 4
    # Summaries of the oldest turns by the agent's own model, in a side session of liminal's
    # (``liminal.kernel.summaries``), one per swap cycle, made once the context passes this
    # share of the trigger and the swap is this many turns away at the thread's pace; the swap's
    # preamble holds them when ready, else the extractive one. On by default: a
    # preamble the model wrote says what the work is and where it stands, which notes cut from
    # the turns do not. It costs a side session per swap cycle (the CLI's own prompt there,
    # liminal's request, the summary's output; the policy counts it and spaces swaps for it),
    # on the person's model account, off the prompt path (measured against auto-compact:
    # docs/gradient.md, "What summaries cost"). False turns them off: the extractive preamble
    # only, no side session.
    summaries: bool = True
    summary_at: float = 0.6
    summary_turns_ahead: int = 2


@dataclass(frozen=True, slots=True)
class MemorySettings:
    # What liminal keeps for the model beyond its context (docs/memory.md). The scratchpad: a
    # text per thread the person (/scratchpad) and the model (the ``scratchpad`` tool) write,
    # placed at the head of every rewrite's preamble; at most this many characters, since every
    # swap's context pays for it.
    scratchpad_chars: int = 4_000
    # A ``search_history`` answer longer than this is kept in the cache as a dump (a retrieval
    # id, a paragraph about it, pages of this size through ``recall``): the model's context
    # takes the paragraph, not the whole answer.
    dump_chars: int = 6_000
    # The model's summaries (``swap.summaries``) also ask for the range's lessons (decisions,
    # facts to keep, conventions, open work), kept per thread and consolidated across threads.
    lessons: bool = True
    # Whose lessons, summaries and titles a swap's dynamic zone weighs beside this thread's
    # memos and passages: "folder" (conversations in the same project folder), "all" (every
    # conversation; another folder's weigh less), "off".
    reach: str = "folder"
    # The same side session reviews what the next swap's zone would place from memory (keep or
    # drop each, with a reason in the journal); off, the first stage's choice stands.
    review: bool = True


@dataclass(frozen=True, slots=True)
class McpSettings:
    # liminal's MCP server (``liminal mcp``: recall, search_history, slash, memos, scratchpad) is
    # added to every session liminal forwards; off, sessions get the client's servers only.
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class ServeSettings:
    # ``liminal serve``: where it listens. A host other than loopback needs --allow-remote.
    listen: str = "127.0.0.1:8765"
    # Browser origins allowed to connect, comma-separated (``http://localhost:3000``); a client
    # that sends no Origin (not a browser) needs only the token.
    origins: str = ""
    # At most this many connections at once; more are refused (503).
    max_connections: int = 32
    # On SIGTERM, the whole stop takes at most this long (a turn under way gets the first part;
    # the rest closes connections, stops agents, flushes spools; then what is left is killed).
    # A service manager's stop timeout must be longer (deploy/liminal-serve.service).
    shutdown_seconds: float = 20.0
    # A request for a thread another connection has open waits this long, then is refused.
    busy_wait_seconds: float = 120.0
    # A connection's agent starts when it sends ``initialize``; one that sends none within this
    # long is closed (it held a connection slot and nothing else).
    initialize_seconds: float = 30.0
    # An initialized connection with no traffic either way and nothing under way for this long is
    # closed (its agent, CLI and index worker stop); 0: never.
    idle_seconds: float = 1800.0
    # A connection that dropped mid-turn keeps its agent until the turn ends, or until the agent
    # has said nothing for this long (what the gone client is still owed is then dropped).
    detached_quiet_seconds: float = 600.0
    # The longest message a client may send, and that is sent to it (the WebSocket's own limit:
    # longer closes the connection, 1009, before it is held whole). Room for a prompt with a few
    # images (the Claude API takes 5 MB an image).
    max_message_bytes: int = 16 * MiB
    # What one connection may have queued for a client that reads slower than its agent writes:
    # past it the agent is paused until the client has taken three quarters.
    queue_bytes: int = 4 * MiB
    # What all connections together may hold in messages on their way (waiting for a thread's
    # lock or the agent, queued for a client): a client's message that would go past it is
    # refused with an error. 32 connections' queues fit in it with room to spare.
    buffer_bytes: int = 256 * MiB


@dataclass(frozen=True, slots=True)
class HarnessSettings:
    # Which CLI's session files the agent writes: "claude", "codex", "gemini", or "auto" (from the agent's
    # ``initialize`` answer, else the agent command's words; Claude Code when nothing says).
    name: str = "auto"


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path = field(default_factory=lambda: Path("~/.liminal").expanduser())
    log_level: str = "info"
    proxy: ProxySettings = field(default_factory=ProxySettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    gradient: GradientSettings = field(default_factory=GradientSettings)
    swap: SwapSettings = field(default_factory=SwapSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    mcp: McpSettings = field(default_factory=McpSettings)
    harness: HarnessSettings = field(default_factory=HarnessSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)

    @property
    def sqlite_path(self) -> Path:
        return self.home / "liminal.db"

    @property
    def journal_path(self) -> Path:
        """The swap journal (``liminal.kernel.journal``)."""
        return self.home / "swaps.jsonl"


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _coerce(name: str, kind: Any, value: Any) -> Any:
    """Turn a TOML or environment value into the declared type of a setting."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off", ""}:
                return False
            raise ValueError(value)
        if kind is int:
            # A TOML float is a whole number only when it is one (150000.0); 1.9 is not cut to 1,
            # and inf or nan is refused like any other value, not an OverflowError.
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(str(value).replace("_", "")) if isinstance(value, str) else int(value)
        if kind is float:
            if isinstance(value, bool):  # ``kill_grace_seconds = true`` is not one second
                raise ValueError(value)
            return float(value)
        if kind is Path:
            return Path(str(value)).expanduser()
        if kind is str:
            return str(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigError(f"{name} = {value!r} is not accepted: a value of type {kind.__name__}") from exc
    raise ConfigError(f"{name}: unsupported setting type {kind!r}")


def _fields(cls: type[Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def setting_names() -> list[str]:
    """Every dotted setting name, for documentation and `liminal config`."""
    names: list[str] = []
    for name, kind in _fields(Settings).items():
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            names.extend(f"{name}.{sub}" for sub in _fields(kind))
        else:
            names.append(name)
    return names


def _apply(layer: dict[str, dict[str, Any]], dotted: str, value: Any) -> None:
    section, _, key = dotted.rpartition(".")
    layer.setdefault(section, {})[key] = value


def load(
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_file: Path | None = None,
    sources: dict[str, str] | None = None,
) -> Settings:
    """Build the settings. ``overrides`` holds command-line values by dotted name (None = unset).

    ``config_file`` is an explicit ``--config``: it must exist. ``sources``, if given, is filled
    with where each setting that is not at its default came from (file, env, flag)."""
    env = os.environ if env is None else env
    merged: dict[str, dict[str, Any]] = {}  # section ("" for top level) -> key -> raw value
    origin: dict[str, str] = {}
    known = set(setting_names())

    home_raw = (overrides or {}).get("home") or env.get("LIMINAL_HOME") or "~/.liminal"
    # Absolute: the home is handed on to processes that start elsewhere (the MCP server runs in
    # the session's folder), where a relative one would name another place.
    home = Path(str(home_raw)).expanduser().absolute()
    path = config_file or home / "config.toml"
    if config_file is not None and not _is_utf8(str(config_file)):
        raise ConfigError(f"--config {config_file!r}: the path is not UTF-8")
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"--config {config_file}: no such file")
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        except RecursionError as exc:
            raise ConfigError(f"{path}: nested too deeply to read") from exc
        for key, value in data.items():
            if isinstance(value, dict):
                for sub, subvalue in value.items():
                    if f"{key}.{sub}" not in known:
                        raise ConfigError(f"{path}: unknown setting {key}.{sub}")
                    _apply(merged, f"{key}.{sub}", subvalue)
                    origin[f"{key}.{sub}"] = f"file {path}"
            elif key == "home":
                raise ConfigError(f"{path}: home cannot be set in a config file (the file is found "
                                  "through it): use LIMINAL_HOME or --home")
            elif key in known:
                _apply(merged, key, value)
                origin[key] = f"file {path}"
            else:
                raise ConfigError(f"{path}: unknown setting {key}")

    for dotted in known:
        var = "LIMINAL_" + dotted.replace(".", "_").upper()
        if var in env:
            _apply(merged, dotted, env[var])
            origin[dotted] = f"env {var}"
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        if dotted not in known:
            raise ConfigError(f"unknown setting {dotted}")
        _apply(merged, dotted, value)
        origin[dotted] = "flag"
    _apply(merged, "home", home)
    home_from = "flag --home" if (overrides or {}).get("home") else "env LIMINAL_HOME"
    # Bytes that are not UTF-8 (read as surrogates) cannot be written as JSON, and liminal
    # writes its settings in JSON: to the agent (the MCP server's arguments), to the log, and
    # in ``liminal config --json``.
    for section, values in merged.items():
        for key, raw in values.items():
            if isinstance(raw, str | Path) and not _is_utf8(str(raw)):
                dotted = f"{section}.{key}" if section else key
                where = home_from if dotted == "home" else origin.get(dotted, "?")
                raise ConfigError(f"{dotted} = {str(raw)!r} ({where}) is not "
                                  "accepted: it is not UTF-8")

    top: dict[str, Any] = {}
    for name, kind in _fields(Settings).items():
        if dataclasses.is_dataclass(kind):
            assert isinstance(kind, type)
            sub_kinds = _fields(kind)
            values = {
                key: _coerce(f"{name}.{key}", sub_kinds[key], raw)
                for key, raw in merged.get(name, {}).items()
            }
            top[name] = kind(**values)
        elif name in merged.get("", {}):
            top[name] = _coerce(name, kind, merged[""][name])
    settings = Settings(**top)
    if "gradient.recent_tokens" in origin and "gradient.long_cache_recent_tokens" not in origin:
        # A recent band set by hand is the band, whatever the cache's life.
        settings = dataclasses.replace(settings, gradient=dataclasses.replace(
            settings.gradient, long_cache_recent_tokens=settings.gradient.recent_tokens))
        origin["gradient.long_cache_recent_tokens"] = f"{origin['gradient.recent_tokens']} (gradient.recent_tokens)"
    validate(settings, explicit=frozenset(origin))
    if sources is not None:
        sources.update(origin)
    return settings


# What each setting accepts, beyond its type: (test, what is accepted). Checked at every start,
# so a value that is accepted is one that works (docs/operations.md, "configuration").
_URL_SCHEMES = {"store.url": ("", "sqlite", "mongodb", "mongodb+srv"), "cache.url": ("", "redis", "rediss", "unix")}
_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "log_level": (lambda v: v.lower() in LOG_LEVELS, "one of " + ", ".join(LOG_LEVELS)),
    "proxy.max_frame_bytes": (lambda v: v >= 256, "a number of bytes, 256 or more"),
    "proxy.kill_grace_seconds": (lambda v: 0 < v <= 3600, "seconds, more than 0 and at most 3600"),
    "proxy.stop_grace_seconds": (lambda v: 0 <= v <= 600, "seconds, 0 (abandon at once) to 600"),
    "store.queue_frames": (lambda v: v >= 1, "a number of frames, 1 or more"),
    "store.indexer": (lambda v: v in ("worker", "inline"), "worker or inline"),
    "store.url": (lambda v: _scheme(v) in _URL_SCHEMES["store.url"] and _sqlite_file_ok(v),
                  "empty (SQLite in the home), sqlite:///absolute/path or mongodb://host/db"),
    "cache.url": (lambda v: _scheme(v) in _URL_SCHEMES["cache.url"] and _port_ok(v),
                  "empty (files in the home) or redis://host:port/db"),
    "cache.ttl_seconds": (lambda v: v >= 1, "seconds, 1 or more"),
    "gradient.target_tokens": (lambda v: v >= 1000, "tokens, 1000 or more"),
    "gradient.recent_tokens": (lambda v: v >= 0, "tokens, 0 or more"),
    "gradient.long_cache_recent_tokens": (lambda v: v >= 0, "tokens, 0 or more"),
    "gradient.middle_tokens": (lambda v: v >= 0, "tokens, 0 or more"),
    "gradient.truncate_chars": (lambda v: v >= 1, "characters, 1 or more"),
    "gradient.truncate_lines": (lambda v: v >= 1, "lines, 1 or more"),
    "gradient.summary_tokens": (lambda v: v >= 100, "tokens, 100 or more"),
    "gradient.zone_tokens": (lambda v: 0 <= v <= 100_000, "tokens, 0 (no zone) to 100000"),
    "swap.high_tokens": (lambda v: v is None or v >= 1000, "tokens, 1000 or more"),
    "swap.target_tokens": (lambda v: v is None or v >= 1000, "tokens, 1000 or more"),
    "swap.cache_life_seconds": (lambda v: 0 <= v <= 86400, "seconds, 0 (no idle swaps) to 86400"),
    "swap.ceiling_tokens": (lambda v: v is None or v >= 2000, "tokens, 2000 or more"),
    "swap.every_turns": (lambda v: v >= 0, "turns, 0 (never) or more"),
    "swap.notice": (lambda v: v in ("silent", "thought", "info"), "silent, thought or info"),
    "swap.hold_timeout_seconds": (lambda v: 0 < v <= 3600, "seconds, more than 0 and at most 3600"),
    "swap.max_stale_sessions": (lambda v: v >= 0, "0 or more"),
    "swap.summary_at": (lambda v: 0 < v <= 1, "a share of the trigger, more than 0 and at most 1"),
    "swap.summary_turns_ahead": (lambda v: 1 <= v <= 1000, "turns, 1 to 1000"),
    "memory.scratchpad_chars": (lambda v: 100 <= v <= 100_000, "characters, 100 to 100000"),
    # Claude Code cuts an MCP tool's answer past about 25k tokens: a page stays under it.
    "memory.dump_chars": (lambda v: 1_000 <= v <= 60_000, "characters, 1000 to 60000"),
    "memory.reach": (lambda v: v in ("off", "folder", "all"), "off, folder or all"),
    "harness.name": (lambda v: v in ("auto", "claude", "codex", "gemini"), "auto, claude, codex or gemini"),
    "serve.listen": (lambda v: _host_port(v) is not None, "HOST:PORT, e.g. 127.0.0.1:8765"),
    "serve.origins": (lambda v: all(o.strip().startswith(("http://", "https://"))
                                    for o in v.split(",") if o.strip()),
                      "comma-separated origins such as http://localhost:3000"),
    "serve.max_connections": (lambda v: v >= 1, "1 or more"),
    "serve.shutdown_seconds": (lambda v: 0 <= v <= 600, "seconds, 0 to 600"),
    "serve.busy_wait_seconds": (lambda v: 0 <= v <= 3600, "seconds, 0 to 3600"),
    "serve.initialize_seconds": (lambda v: 0 < v <= 3600, "seconds, more than 0, at most 3600"),
    "serve.idle_seconds": (lambda v: 0 <= v <= 7 * 86400, "seconds, 0 (never) to 604800"),
    "serve.detached_quiet_seconds": (lambda v: 0 < v <= 3600, "seconds, more than 0, at most 3600"),
    "serve.max_message_bytes": (lambda v: 4096 <= v <= 1024 * MiB, "a number of bytes, 4096 to 1073741824"),
    "serve.queue_bytes": (lambda v: 64 * 1024 <= v <= 1024 * MiB, "a number of bytes, 65536 to 1073741824"),
    "serve.buffer_bytes": (lambda v: MiB <= v <= 64 * 1024 * MiB, "a number of bytes, 1048576 to 68719476736"),
}


def _host_port(text: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a pair, or None."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    return host.strip("[]"), int(port)


def _sqlite_file_ok(url: str) -> bool:
    """A ``sqlite://`` URL names a file by its absolute path (``~`` allowed): a relative one is
    another file for every process started in another folder (the MCP server, in the
    session's)."""
    if _scheme(url) != "sqlite":
        return True
    rest = url.partition("://")[2]
    return bool(rest) and not rest.endswith("/") and Path(rest).expanduser().is_absolute()


def _port_ok(url: str) -> bool:
    """A network URL's host and port parse (what the Redis client refuses at every use)."""
    if _scheme(url) in ("", "unix"):
        return True
    try:
        urllib.parse.urlsplit(url).port  # noqa: B018 (a property that raises)
    except ValueError:
        return False
    return True


def _scheme(url: str) -> str:
    return url.partition("://")[0].lower() if "://" in url else ("" if not url else "?")


def value_of(settings: Settings, dotted: str) -> Any:
    section, _, key = dotted.rpartition(".")
    holder: Any = getattr(settings, section) if section else settings
    return getattr(holder, key)


def _home_problem(home: Path) -> str | None:
    """Why ``home`` can never be liminal's folder (a file is there or on the way), or None."""
    for path in (home, *home.parents):
        if path.is_dir():
            return None
        if path.is_symlink():
            return f"{path} is a link to nothing"
        if os.path.lexists(path):
            return f"{path} is a file"
    return None


def validate(settings: Settings, explicit: frozenset[str] = frozenset()) -> None:
    """Refuse any value a setting does not accept, naming the setting, the value and what is.
    ``explicit``: the settings given (in the file, the environment or a flag), not defaults."""
    for dotted, (accepts, accepted) in _RULES.items():
        value = value_of(settings, dotted)
        if not accepts(value):
            raise ConfigError(f"{dotted} = {value!r} is not accepted: {accepted}")
    problem = _home_problem(settings.home)
    if problem:
        raise ConfigError(f"home = {str(settings.home)!r} (LIMINAL_HOME, --home) is not accepted: "
                          f"a folder, or a path where one can be made ({problem})")
    high, target = settings.swap.high_tokens, settings.swap.target_tokens
    if high is not None and target is not None and target >= high:
        raise ConfigError(
            f"swap.target_tokens = {settings.swap.target_tokens} is not accepted: it must be below "
            f"swap.high_tokens ({settings.swap.high_tokens}), or every swap would trigger the next")
    if settings.serve.buffer_bytes < settings.serve.max_message_bytes:
        raise ConfigError(
            f"serve.buffer_bytes = {settings.serve.buffer_bytes} is not accepted: it must be at least "
            f"serve.max_message_bytes ({settings.serve.max_message_bytes}), or the longest message "
            "could never be taken")
    _thresholds_fit(settings, explicit)


def _thresholds_fit(settings: Settings, explicit: frozenset[str]) -> None:
    """Refuse thresholds the floor cannot fit under, where the settings alone (before the CLI's
    own prompt, which a thread shows only once it runs) already say so. Under a target, a
    recent band or preamble left at its default shrinks to fit (docs/gradient.md); one set by
    hand is a promise to keep, and cannot be kept with the other."""
    swap, gradient = settings.swap, settings.gradient
    high, target = swap.high_tokens, swap.target_tokens
    least_preamble = min(gradient.summary_tokens, PREAMBLE_MIN_TOKENS)
    if target is not None:
        if "gradient.summary_tokens" in explicit and gradient.summary_tokens >= target:
            raise ConfigError(
                f"gradient.summary_tokens = {gradient.summary_tokens} is not accepted with "
                f"swap.target_tokens = {target}: the preamble alone would fill the target; lower "
                "gradient.summary_tokens or raise swap.target_tokens")
        if "gradient.recent_tokens" in explicit and gradient.recent_tokens + least_preamble >= target:
            raise ConfigError(
                f"gradient.recent_tokens = {gradient.recent_tokens} is not accepted with "
                f"swap.target_tokens = {target}: the recent band kept whole and the preamble (at "
                f"least {least_preamble}) must fit under the target; lower gradient.recent_tokens "
                f"below {target - least_preamble} (or leave it unset: it then fits itself) or "
                "raise swap.target_tokens")
    elif high is not None:
        # The floor's recent band is one of two, by the thread's cache (``CostPolicy.recent``).
        name, band = max([("gradient.recent_tokens", gradient.recent_tokens),
                          ("gradient.long_cache_recent_tokens", gradient.long_cache_recent_tokens)],
                         key=lambda named: named[1])
        if band + gradient.summary_tokens >= high:
            raise ConfigError(
                f"swap.high_tokens = {high} is not accepted without swap.target_tokens: a swap goes "
                f"down to the floor, {name} ({band}) and gradient.summary_tokens "
                f"({gradient.summary_tokens}) over the CLI's own prompt, which is not below it; set "
                f"swap.target_tokens too (the recent band then fits under it) or lower {name}")
