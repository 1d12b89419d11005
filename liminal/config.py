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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 1024 * 1024


class ConfigError(ValueError):
    """A setting could not be read or has a value of the wrong type."""


@dataclass(frozen=True, slots=True)
class ProxySettings:
    # Large enough for a prompt carrying several base64 images; a line beyond it is refused.
    max_frame_bytes: int = 64 * MiB
    # The older Claude adapter ignores stdin EOF, so after the client leaves we signal its group.
    kill_grace_seconds: float = 5.0
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


@dataclass(frozen=True, slots=True)
class GradientSettings:
    # The context the gradient aims for after a rewrite.
    target_tokens: int = 100_000
    # Budgets of the bands, youngest first. The recent band is kept byte for byte.
    recent_tokens: int = 40_000
    middle_tokens: int = 40_000
    # Tool output in the middle band is cut to this many characters (and a few first lines).
    truncate_chars: int = 120
    truncate_lines: int = 2
    # The preamble that consolidates the ancient band is written to fit this budget.
    summary_tokens: int = 6_000


@dataclass(frozen=True, slots=True)
class SwapSettings:
    enabled: bool = True
    # Swap once the context passes high_tokens, aiming for target_tokens after the rewrite.
    high_tokens: int = 120_000
    target_tokens: int = 100_000
    # Also swap every N turns (0: never for that reason alone).
    every_turns: int = 0
    # How the UI hears about a swap: "silent", "thought" or "info".
    notice: str = "thought"
    # Prompts wait at most this long for a swap; after it the swap is abandoned.
    hold_timeout_seconds: float = 30.0
    # An agent that cannot close sessions keeps every session a swap left, each a CLI process;
    # past this many, liminal moves the live ones to a fresh agent process at a quiet moment.
    max_stale_sessions: int = 4


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path = field(default_factory=lambda: Path("~/.liminal").expanduser())
    log_level: str = "info"
    proxy: ProxySettings = field(default_factory=ProxySettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    gradient: GradientSettings = field(default_factory=GradientSettings)
    swap: SwapSettings = field(default_factory=SwapSettings)

    @property
    def sqlite_path(self) -> Path:
        return self.home / "liminal.db"

    @property
    def journal_path(self) -> Path:
        """The swap journal (``liminal.kernel.journal``)."""
        return self.home / "swaps.jsonl"


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
            if isinstance(value, bool):
                raise ValueError(value)
            return int(str(value).replace("_", "")) if isinstance(value, str) else int(value)
        if kind is float:
            return float(value)
        if kind is Path:
            return Path(str(value)).expanduser()
        if kind is str:
            return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: cannot read {value!r} as {kind.__name__}") from exc
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
) -> Settings:
    """Build the settings. ``overrides`` holds command-line values by dotted name (None = unset)."""
    env = os.environ if env is None else env
    merged: dict[str, dict[str, Any]] = {}  # section ("" for top level) -> key -> raw value
    known = set(setting_names())

    home_raw = (overrides or {}).get("home") or env.get("LIMINAL_HOME") or "~/.liminal"
    home = Path(str(home_raw)).expanduser()
    path = config_file or home / "config.toml"
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        for key, value in data.items():
            if isinstance(value, dict):
                for sub, subvalue in value.items():
                    if f"{key}.{sub}" not in known:
                        raise ConfigError(f"{path}: unknown setting {key}.{sub}")
                    _apply(merged, f"{key}.{sub}", subvalue)
            elif key in known:
                _apply(merged, key, value)
            else:
                raise ConfigError(f"{path}: unknown setting {key}")

    for dotted in known:
        var = "LIMINAL_" + dotted.replace(".", "_").upper()
        if var in env:
            _apply(merged, dotted, env[var])
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        if dotted not in known:
            raise ConfigError(f"unknown setting {dotted}")
        _apply(merged, dotted, value)
    _apply(merged, "home", home)

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
    if settings.store.indexer not in {"worker", "inline"}:
        raise ConfigError("store.indexer must be worker or inline")
    if settings.swap.notice not in {"silent", "thought", "info"}:
        raise ConfigError("swap.notice must be silent, thought or info")
    if settings.swap.max_stale_sessions < 0:
        raise ConfigError(f"swap.max_stale_sessions must be 0 or more, not {settings.swap.max_stale_sessions}")
    return settings
