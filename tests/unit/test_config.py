from __future__ import annotations

from pathlib import Path

import pytest

from liminal import config


def test_defaults(tmp_path: Path) -> None:
    settings = config.load(env={"LIMINAL_HOME": str(tmp_path)})
    assert settings.home == tmp_path
    assert settings.proxy.max_frame_bytes == 64 * 1024 * 1024
    assert settings.swap.high_tokens == 120_000
    assert settings.sqlite_path == tmp_path / "liminal.db"


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'log_level = "warning"\n[proxy]\nmax_frame_bytes = 1000\nkill_grace_seconds = 1.5\n'
        "[swap]\nhigh_tokens = 5000\n"
    )
    env = {"LIMINAL_HOME": str(tmp_path), "LIMINAL_PROXY_MAX_FRAME_BYTES": "2000",
           "LIMINAL_SWAP_HIGH_TOKENS": "7_000"}
    settings = config.load({"proxy.max_frame_bytes": 3000, "swap.high_tokens": None}, env=env)
    assert settings.log_level == "warning"  # file
    assert settings.proxy.kill_grace_seconds == 1.5  # file
    assert settings.swap.high_tokens == 7000  # env beats file; None flag is unset
    assert settings.proxy.max_frame_bytes == 3000  # flag beats env


def test_unknown_settings_and_bad_values_are_errors(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[proxy]\nmax_frame = 1\n")
    with pytest.raises(config.ConfigError, match=r"proxy\.max_frame"):
        config.load(env={"LIMINAL_HOME": str(tmp_path)})
    with pytest.raises(config.ConfigError, match="int"):
        config.load(env={"LIMINAL_HOME": str(tmp_path / "x"), "LIMINAL_PROXY_MAX_FRAME_BYTES": "lots"})
    with pytest.raises(config.ConfigError, match="notice"):
        config.load({"swap.notice": "loud"}, env={"LIMINAL_HOME": str(tmp_path / "x")})
    with pytest.raises(config.ConfigError, match=r"swap\.max_stale_sessions.*-1"):
        config.load(env={"LIMINAL_HOME": str(tmp_path / "x"), "LIMINAL_SWAP_MAX_STALE_SESSIONS": "-1"})


def test_booleans_from_the_environment(tmp_path: Path) -> None:
    settings = config.load(env={"LIMINAL_HOME": str(tmp_path), "LIMINAL_SWAP_ENABLED": "off"})
    assert settings.swap.enabled is False


def test_every_setting_has_a_name() -> None:
    names = config.setting_names()
    assert "proxy.max_frame_bytes" in names and "log_level" in names
