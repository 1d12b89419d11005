from __future__ import annotations

from pathlib import Path

import pytest

from liminal import config


def test_defaults(tmp_path: Path) -> None:
    settings = config.load(env={"LIMINAL_HOME": str(tmp_path)})
    assert settings.home == tmp_path
    assert settings.proxy.max_frame_bytes == 64 * 1024 * 1024
    # Unset: the cost policy chooses them per thread (liminal.kernel.policy).
    assert settings.swap.high_tokens is None and settings.swap.target_tokens is None
    assert settings.swap.cache_life_seconds == 300
    assert settings.sqlite_path == tmp_path / "liminal.db"


def test_the_models_summaries_are_on_by_default_and_one_setting_turns_them_off(tmp_path: Path) -> None:
    """Issue 24: the oldest turns summarised by the agent's own model, in a side session of
    liminal's, is the default (``swap.summaries``); false wires no side summaries at all."""
    from liminal.kernel.summaries import SideSummaries
    from liminal.wiring import components

    on = config.load(env={"LIMINAL_HOME": str(tmp_path)})
    assert on.swap.summaries is True
    assert [c for c in components(on) if isinstance(c, SideSummaries)]
    off = config.load(env={"LIMINAL_HOME": str(tmp_path), "LIMINAL_SWAP_SUMMARIES": "false"})
    assert off.swap.summaries is False
    assert not [c for c in components(off) if isinstance(c, SideSummaries)]


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'log_level = "warning"\n[proxy]\nmax_frame_bytes = 1000\nkill_grace_seconds = 1.5\n'
        "[swap]\nhigh_tokens = 150000\n"
    )
    env = {"LIMINAL_HOME": str(tmp_path), "LIMINAL_PROXY_MAX_FRAME_BYTES": "2000",
           "LIMINAL_SWAP_HIGH_TOKENS": "170_000"}
    settings = config.load({"proxy.max_frame_bytes": 3000, "swap.high_tokens": None}, env=env)
    assert settings.log_level == "warning"  # file
    assert settings.proxy.kill_grace_seconds == 1.5  # file
    assert settings.swap.high_tokens == 170_000  # env beats file; None flag is unset
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


BAD_VALUES = [
    ("LIMINAL_PROXY_MAX_FRAME_BYTES", "0", "proxy.max_frame_bytes"),
    ("LIMINAL_PROXY_MAX_FRAME_BYTES", "-5", "proxy.max_frame_bytes"),
    ("LIMINAL_PROXY_KILL_GRACE_SECONDS", "0", "proxy.kill_grace_seconds"),
    ("LIMINAL_PROXY_STOP_GRACE_SECONDS", "-1", "proxy.stop_grace_seconds"),
    ("LIMINAL_STORE_QUEUE_FRAMES", "0", "store.queue_frames"),
    ("LIMINAL_STORE_INDEXER", "threads", "store.indexer"),
    ("LIMINAL_STORE_URL", "postgres://localhost/x", "store.url"),
    ("LIMINAL_STORE_URL", "just-a-name", "store.url"),
    ("LIMINAL_CACHE_URL", "memcached://x", "cache.url"),
    # Accepted before, then refused by the Redis client at each use (a warning, no shared locks).
    ("LIMINAL_CACHE_URL", "redis://h:abc/0", "cache.url"),
    ("LIMINAL_CACHE_URL", "redis://h:99999/0", "cache.url"),
    ("LIMINAL_CACHE_URL", "rediss://[::1/0", "cache.url"),
    ("LIMINAL_CACHE_TTL_SECONDS", "-1", "cache.ttl_seconds"),
    ("LIMINAL_GRADIENT_TARGET_TOKENS", "0", "gradient.target_tokens"),
    ("LIMINAL_GRADIENT_RECENT_TOKENS", "-1", "gradient.recent_tokens"),
    ("LIMINAL_GRADIENT_TRUNCATE_CHARS", "0", "gradient.truncate_chars"),
    ("LIMINAL_SWAP_HIGH_TOKENS", "-100", "swap.high_tokens"),
    ("LIMINAL_SWAP_TARGET_TOKENS", "500", "swap.target_tokens"),
    ("LIMINAL_SWAP_CACHE_LIFE_SECONDS", "-1", "swap.cache_life_seconds"),
    ("LIMINAL_SWAP_CEILING_TOKENS", "10", "swap.ceiling_tokens"),
    ("LIMINAL_SWAP_EVERY_TURNS", "-1", "swap.every_turns"),
    ("LIMINAL_SWAP_HOLD_TIMEOUT_SECONDS", "0", "swap.hold_timeout_seconds"),
    ("LIMINAL_SWAP_ENABLED", "perhaps", "swap.enabled"),
    ("LIMINAL_LOG_LEVEL", "verbose", "log_level"),
    ("LIMINAL_MEMORY_SCRATCHPAD_CHARS", "10", "memory.scratchpad_chars"),
    ("LIMINAL_MEMORY_SCRATCHPAD_CHARS", "1000000", "memory.scratchpad_chars"),
    ("LIMINAL_MEMORY_DUMP_CHARS", "0", "memory.dump_chars"),
    ("LIMINAL_MEMORY_DUMP_CHARS", "100000", "memory.dump_chars"),
    ("LIMINAL_SERVE_INITIALIZE_SECONDS", "0", "serve.initialize_seconds"),
    ("LIMINAL_SERVE_INITIALIZE_SECONDS", "7200", "serve.initialize_seconds"),
    ("LIMINAL_SERVE_IDLE_SECONDS", "-1", "serve.idle_seconds"),
    ("LIMINAL_SERVE_DETACHED_QUIET_SECONDS", "0", "serve.detached_quiet_seconds"),
    ("LIMINAL_SERVE_MAX_MESSAGE_BYTES", "100", "serve.max_message_bytes"),
    ("LIMINAL_SERVE_QUEUE_BYTES", "1000", "serve.queue_bytes"),
    ("LIMINAL_SERVE_BUFFER_BYTES", "1000", "serve.buffer_bytes"),
]


def test_a_server_budget_smaller_than_one_message_is_refused(tmp_path: Path) -> None:
    with pytest.raises(config.ConfigError) as caught:
        config.load(env={"LIMINAL_HOME": str(tmp_path), "LIMINAL_SERVE_BUFFER_BYTES": str(2 << 20),
                         "LIMINAL_SERVE_MAX_MESSAGE_BYTES": str(4 << 20)})
    message = str(caught.value)
    assert "serve.buffer_bytes" in message and "serve.max_message_bytes" in message and "\n" not in message


@pytest.mark.parametrize(("var", "value", "name"), BAD_VALUES)
def test_a_value_a_setting_does_not_accept_is_refused_naming_it(
    tmp_path: Path, var: str, value: str, name: str
) -> None:
    with pytest.raises(config.ConfigError) as caught:
        config.load(env={"LIMINAL_HOME": str(tmp_path), var: value})
    assert name in str(caught.value) and repr(value).strip("'") in str(caught.value)


def test_a_config_file_that_is_not_utf8_or_missing_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_bytes(b'log_level = "\xff\xfe"\n')
    with pytest.raises(config.ConfigError, match="not UTF-8"):
        config.load(env={"LIMINAL_HOME": str(tmp_path)})
    with pytest.raises(config.ConfigError, match="no such file"):
        config.load(env={"LIMINAL_HOME": str(tmp_path)}, config_file=tmp_path / "missing.toml")


def test_sources_say_where_each_setting_came_from(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[swap]\nhigh_tokens = 150000\n")
    sources: dict[str, str] = {}
    config.load({"swap.notice": "info"}, env={"LIMINAL_HOME": str(tmp_path), "LIMINAL_LOG_LEVEL": "debug"},
                sources=sources)
    assert sources["swap.high_tokens"].startswith("file ")
    assert sources["log_level"] == "env LIMINAL_LOG_LEVEL"
    assert sources["swap.notice"] == "flag"
    assert "swap.target_tokens" not in sources  # the default


@pytest.mark.parametrize("argv, env", [
    (["acp", "--", "true"], {"LIMINAL_PROXY_MAX_FRAME_BYTES": "0"}),
    (["acp", "--", "true"], {"LIMINAL_LOG_LEVEL": "verbose"}),
    (["--log-level", "loud", "threads"], {}),
    (["acp", "--swap-high-tokens", "-3", "--", "true"], {}),
    (["threads"], {"LIMINAL_STORE_URL": "postgres://x/y"}),
    (["acp", "--", "true"], {"LIMINAL_MEMORY_SCRATCHPAD_CHARS": "many"}),
    (["threads"], {"LIMINAL_MEMORY_DUMP_CHARS": "-1"}),
    (["--config", "/nonexistent/liminal.toml", "threads"], {}),
    (["threads"], {"NOT_UTF8": "1"}),
    (["threads"], {"DEEP": "1"}),  # nested past Python's recursion limit: a RecursionError
])
def test_bad_configuration_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], env: dict[str, str],
) -> None:
    from liminal.cli import main

    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    if env.pop("NOT_UTF8", None):
        (tmp_path / "config.toml").write_bytes(b"log_level = '\xff'\n")
    if env.pop("DEEP", None):
        (tmp_path / "config.toml").write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_liminal_config_shows_each_value_and_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from liminal.cli import main

    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    monkeypatch.setenv("LIMINAL_SWAP_NOTICE", "info")
    assert main(["config", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["settings"]
    assert shown["swap.notice"] == {"value": "info", "source": "env LIMINAL_SWAP_NOTICE"}
    assert shown["swap.high_tokens"] == {"value": None, "source": "default"}
    assert set(shown) == set(config.setting_names()) - {"home"}


def test_a_relative_python_path_is_made_absolute_for_the_processes_liminal_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """An agent starts liminal's MCP server in the session's folder, and Gemini CLI gives it the
    PYTHONPATH it inherited from liminal: relative, it would name other code there."""
    import os

    from liminal.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["src", "/already/absolute"]))
    assert main(["config", "--json"]) == 0
    assert os.environ["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "src"), "/already/absolute"])


@pytest.mark.parametrize("broken", ["damaged database", "unsupported scheme", "open home", "open token"])
def test_doctor_and_the_readers_say_what_is_wrong_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], broken: str,
) -> None:
    from liminal.cli import main

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("LIMINAL_HOME", str(home))
    if broken == "damaged database":
        (home / "liminal.db").write_bytes(b"this is not a database" * 100)
    elif broken == "unsupported scheme":
        monkeypatch.setenv("LIMINAL_STORE_URL", "ftp://example/x")
    elif broken == "open token":
        (home / "serve-token").write_text("x" * 43)
        (home / "serve-token").chmod(0o644)
    else:
        (home / "swaps.jsonl").write_text("")
        (home / "swaps.jsonl").chmod(0o644)
    code = main(["doctor"])
    out, err = capsys.readouterr()
    if broken == "unsupported scheme":  # refused as configuration, before any check
        assert code == 2 and len(err.strip().splitlines()) == 1
        return
    assert code == 1 and "PROBLEM" in out and "Traceback" not in out + err
    if broken == "open token":
        assert "chmod 600" in out
    # Every line answers (a long answer wraps under itself); the CLIs' folders and SQLite's FTS5
    # are among them.
    assert all(line.startswith(("ok ", "PROBLEM", " " * 16)) for line in out.strip().splitlines())
    assert any(" codex " in line and "sessions" in line for line in out.splitlines())
    assert any("FTS5" in line for line in out.splitlines())
    if broken == "damaged database":
        for reader in (["threads"], ["search", "x"], ["history", "abc"]):
            assert main(reader) == 1
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and "not a database" in err, err


def test_a_target_at_or_above_the_trigger_is_refused_when_both_are_set(tmp_path: Path) -> None:
    env = {"LIMINAL_HOME": str(tmp_path), "LIMINAL_SWAP_HIGH_TOKENS": "90000",
           "LIMINAL_SWAP_TARGET_TOKENS": "90000"}
    with pytest.raises(config.ConfigError, match=r"swap\.target_tokens = 90000"):
        config.load(env=env)
    # One of them alone is fine: the cost policy chooses the other.
    only = config.load(env={"LIMINAL_HOME": str(tmp_path), "LIMINAL_SWAP_TARGET_TOKENS": "90000"})
    assert only.swap.target_tokens == 90_000 and only.swap.high_tokens is None


THRESHOLDS_THAT_CANNOT_WORK = [
    # The recent band set by hand is kept whole: with the preamble it cannot fit the target.
    ({"LIMINAL_SWAP_HIGH_TOKENS": "20000", "LIMINAL_SWAP_TARGET_TOKENS": "12000",
      "LIMINAL_GRADIENT_RECENT_TOKENS": "20000"}, "gradient.recent_tokens = 20000"),
    ({"LIMINAL_SWAP_TARGET_TOKENS": "5000", "LIMINAL_GRADIENT_RECENT_TOKENS": "4500"},
     "gradient.recent_tokens = 4500"),
    # The preamble set by hand fills the target alone.
    ({"LIMINAL_SWAP_HIGH_TOKENS": "9000", "LIMINAL_SWAP_TARGET_TOKENS": "5000",
      "LIMINAL_GRADIENT_SUMMARY_TOKENS": "6000"}, "gradient.summary_tokens = 6000"),
    # A trigger alone under the floor it swaps to (recent band 20k and preamble 4k by default).
    ({"LIMINAL_SWAP_HIGH_TOKENS": "20000"}, "swap.high_tokens = 20000"),
]


@pytest.mark.parametrize(("env", "named"), THRESHOLDS_THAT_CANNOT_WORK)
def test_thresholds_the_floor_cannot_fit_under_are_refused_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    env: dict[str, str], named: str,
) -> None:
    """Issue 20: swap.high_tokens / swap.target_tokens were accepted with a recent band that could
    never fit under them, and then every swap was skipped (or landed at the trigger). A
    combination that cannot work is refused at start, in one line naming what to change."""
    from liminal.cli import main

    with pytest.raises(config.ConfigError, match=named.replace(".", r"\.")):
        config.load(env={"LIMINAL_HOME": str(tmp_path), **env})
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["acp", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and named in err and "Traceback" not in err, err


def test_thresholds_a_default_band_fits_under_are_accepted(tmp_path: Path) -> None:
    """The recent band and preamble left at their defaults shrink to fit a target (the issue's
    9000/5000 and 20000/12000); set by hand under it, they are kept. The floor's bounds are
    read as the gradients apply them (``floor_bounds``), before the CLI's own prompt is known."""
    from liminal.kernel.policy import floor_bounds

    def bounds(**env: str) -> tuple[int, int, str]:
        settings = config.load(env={"LIMINAL_HOME": str(tmp_path), **env})
        floor = floor_bounds(settings.swap, settings.gradient)
        return floor.recent, floor.preamble, floor.limited_by

    for high, target in (("9000", "5000"), ("20000", "12000")):  # the defaults shrink to fit
        recent, preamble, limited_by = bounds(LIMINAL_SWAP_HIGH_TOKENS=high, LIMINAL_SWAP_TARGET_TOKENS=target)
        assert recent + preamble <= int(target) and recent > 0 and preamble > 0, (recent, preamble)
        assert limited_by == "swap.target_tokens"
    recent, preamble, limited_by = bounds(LIMINAL_SWAP_HIGH_TOKENS="9000", LIMINAL_SWAP_TARGET_TOKENS="6000",
                                          LIMINAL_GRADIENT_RECENT_TOKENS="4000")
    assert (recent, limited_by) == (4000, "gradient.recent_tokens") and recent + preamble <= 6000  # kept
    recent, preamble, _ = bounds(LIMINAL_SWAP_HIGH_TOKENS="30000")  # no target: the floor, under the trigger
    assert recent + preamble < 30000


def _floor_paragraph(out: str) -> list[str]:
    """The ``floor:`` paragraph of ``liminal config``, wrapped at 100 columns when piped, as one line."""
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("floor")]
    if not starts:
        return []
    return [" ".join(line.strip() for line in lines[starts[0]:])]


def test_liminal_config_says_what_bounds_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from liminal.cli import main

    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    assert main(["config"]) == 0
    floor = _floor_paragraph(capsys.readouterr().out)
    assert floor and "gradient.recent_tokens" in floor[0] and "20,000" in floor[0], floor
    monkeypatch.setenv("LIMINAL_SWAP_HIGH_TOKENS", "20000")
    monkeypatch.setenv("LIMINAL_SWAP_TARGET_TOKENS", "12000")
    assert main(["config"]) == 0
    floor = _floor_paragraph(capsys.readouterr().out)
    assert "swap.target_tokens" in floor[0] and "fitted under the target" in floor[0], floor
    assert main(["config", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["floor"]
    assert shown["limited_by"] == "swap.target_tokens" and shown["preamble_tokens"] == 3_000
    assert shown["recent_tokens"] == 9_000  # at most: less the CLI's own prompt


def test_the_deploy_config_lists_every_setting_and_loads_as_the_defaults(tmp_path: Path) -> None:
    """deploy/config.toml is what people copy: it must load, mean the defaults, and name every
    setting (those whose default is "chosen by liminal" commented out)."""
    import re
    import tomllib

    deploy = Path(__file__).parents[2] / "deploy" / "config.toml"
    text = deploy.read_text()
    section = ""
    named: set[str] = set()
    for line in text.splitlines():
        header = re.match(r"^\[(\w+)\]", line)
        if header:
            section = header.group(1)
        key = re.match(r"^#? ?(\w+) = ", line)
        if key:
            named.add(f"{section}.{key.group(1)}" if section else key.group(1))
    assert set(config.setting_names()) - {"home"} <= named
    tomllib.loads(text)
    loaded = config.load(env={"LIMINAL_HOME": str(tmp_path)}, config_file=deploy)
    assert loaded == config.load(env={"LIMINAL_HOME": str(tmp_path)})


@pytest.mark.parametrize("line", [
    "[swap]\nhigh_tokens = inf\n",        # TOML's infinity for a whole number of tokens
    "[swap]\nhigh_tokens = 1e400\n",      # a float too large: infinity too
    "[swap]\nevery_turns = nan\n",
    "[gradient]\ntruncate_chars = 1.9\n",  # was silently cut to 1
    "[store]\nqueue_frames = 2.5\n",
    "[proxy]\nkill_grace_seconds = true\n",  # a boolean is not a number of seconds
])
def test_a_number_of_the_wrong_kind_in_the_file_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], line: str,
) -> None:
    from liminal.cli import main

    (tmp_path / "config.toml").write_text(line)
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    assert main(["config"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert line.split("\n")[1].split(" =")[0] in err


def test_a_whole_float_is_a_whole_number(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[swap]\nhigh_tokens = 150000.0\n")
    assert config.load(env={"LIMINAL_HOME": str(tmp_path)}).swap.high_tokens == 150_000


def test_a_relative_home_is_where_liminal_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert config.load(env={"LIMINAL_HOME": "rel"}).home == tmp_path / "rel"
    assert config.load({"home": Path("other")}, env={}).home == tmp_path / "other"


@pytest.mark.parametrize("url", ["sqlite://liminal.db", "sqlite://", "sqlite:///"])
def test_a_sqlite_store_is_an_absolute_file(tmp_path: Path, url: str) -> None:
    """A relative one would be another file for the MCP server, which the agent starts in the
    session's folder (and for every command run elsewhere)."""
    with pytest.raises(config.ConfigError, match=r"store\.url"):
        config.load(env={"LIMINAL_HOME": str(tmp_path), "LIMINAL_STORE_URL": url})
    assert config.load(env={"LIMINAL_HOME": str(tmp_path),
                            "LIMINAL_STORE_URL": f"sqlite://{tmp_path}/x.db"}).store.url


@pytest.mark.parametrize("kind", ["file", "under a file", "dangling link"])
@pytest.mark.parametrize("argv", [["threads"], ["swaps"], ["acp", "--", "true"]])
def test_a_home_that_cannot_be_a_folder_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    kind: str, argv: list[str],
) -> None:
    from liminal.cli import main

    (tmp_path / "a-file").write_text("x")
    home = {"file": tmp_path / "a-file", "under a file": tmp_path / "a-file" / "home",
            "dangling link": tmp_path / "link"}[kind]
    if kind == "dangling link":
        home.symlink_to(tmp_path / "nowhere" / "home")
    monkeypatch.setenv("LIMINAL_HOME", str(home))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "home" in err and "folder" in err, err


@pytest.mark.parametrize("argv", [
    ["frob"],                                      # no such command
    ["--home"],                                    # a flag without its value
    ["acp", "--swap-high-tokens"],
    ["threads", "--limit", "abc"],
    ["threads", "--limit", "-1"],                  # listed "no threads yet" with threads there
    ["threads", "--limit", "0"],
    ["search", "x", "--limit", "99999999999999999999"],  # an OverflowError traceback from SQLite
    ["search", "x", "--limit", "-5"],
    ["inspect", "x", "--largest", "-1"],
])
def test_a_bad_command_line_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    from liminal.cli import main
    from liminal.store.records import Batch, ThreadUpdate
    from liminal.store.sqlite import SqliteStore

    async def one_thread() -> None:
        store = await SqliteStore.open(tmp_path / "liminal.db")
        await store.write(Batch(threads=[ThreadUpdate("t1", 1.0, title="one")]))
        await store.aclose()

    import anyio

    anyio.run(one_thread)
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("where", ["LIMINAL_HOME", "LIMINAL_STORE_URL", "LIMINAL_SERVE_ORIGINS",
                                   "--home", "--config"])
def test_a_setting_that_is_not_utf8_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], where: str,
) -> None:
    """Bytes that are not UTF-8 in a variable or a flag (Python reads them as surrogates) cannot
    be written as JSON: `liminal config --json` crashed, and liminal acp could not add its MCP
    server (whose arguments name the home) to any session."""
    from liminal.cli import main

    bad = str(tmp_path) + "/x\udcff"
    Path(bad).mkdir()
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path))
    argv = ["config", "--json"]
    if where == "LIMINAL_STORE_URL":
        monkeypatch.setenv(where, "mongodb://h\udcff/db")
    elif where == "LIMINAL_SERVE_ORIGINS":
        monkeypatch.setenv(where, "http://h\udcff")
    elif where.startswith("LIMINAL_"):
        monkeypatch.setenv(where, bad)
    elif where == "--home":
        argv = ["--home", bad, *argv]
    else:
        (Path(bad) / "c.toml").write_text("")
        argv = ["--config", bad + "/c.toml", *argv]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "UTF-8" in err, err


def test_home_in_a_config_file_is_refused_not_ignored(tmp_path: Path) -> None:
    """The file is found through the home, so a home set in it was accepted and silently
    ignored: everything went on being written where the user had asked it not to be."""
    (tmp_path / "config.toml").write_text(f'home = "{tmp_path / "elsewhere"}"\n')
    with pytest.raises(config.ConfigError, match=r"home.*LIMINAL_HOME or --home"):
        config.load(env={"LIMINAL_HOME": str(tmp_path)})
    other = tmp_path / "other.toml"
    other.write_text(f'home = "{tmp_path / "elsewhere"}"\n')
    with pytest.raises(config.ConfigError, match=r"home.*LIMINAL_HOME or --home"):
        config.load(env={"LIMINAL_HOME": str(tmp_path)}, config_file=other)


@pytest.mark.parametrize("flag", ["--home", "--config"])
def test_an_empty_home_or_config_flag_is_refused_not_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str,
) -> None:
    """``--home "$DIR"`` with DIR unset made the current folder liminal's home (Path("") is
    "."): its files were written there, and the folder, the user's project, was made 0700."""
    from liminal.cli import main

    folder = tmp_path / "project"
    folder.mkdir()
    folder.chmod(0o755)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("LIMINAL_HOME", str(tmp_path / "home"))
    with pytest.raises(SystemExit) as exited:
        main([flag, "", "swaps"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and flag in err, err
    assert (folder.stat().st_mode & 0o777) == 0o755 and list(folder.iterdir()) == []


def test_a_recent_band_set_by_hand_is_the_band_at_every_cache_life(tmp_path: Path) -> None:
    """gradient.long_cache_recent_tokens (10k) is the band on a thread whose cache lives an hour;
    a person who set gradient.recent_tokens alone meant that band, whatever the cache."""
    defaults = config.load(env={"LIMINAL_HOME": str(tmp_path)}).gradient
    assert (defaults.recent_tokens, defaults.long_cache_recent_tokens) == (20_000, 10_000)
    env = {"LIMINAL_HOME": str(tmp_path), "LIMINAL_GRADIENT_RECENT_TOKENS": "30000"}
    assert config.load(env=env).gradient.long_cache_recent_tokens == 30_000
    both = config.load(env={**env, "LIMINAL_GRADIENT_LONG_CACHE_RECENT_TOKENS": "12000"}).gradient
    assert (both.recent_tokens, both.long_cache_recent_tokens) == (30_000, 12_000)
    with pytest.raises(config.ConfigError, match=r"gradient\.long_cache_recent_tokens = -1 is not accepted"):
        config.load(env={"LIMINAL_HOME": str(tmp_path), "LIMINAL_GRADIENT_LONG_CACHE_RECENT_TOKENS": "-1"})


def test_the_long_caches_band_must_fit_under_a_trigger_alone_and_says_where_it_came_from(tmp_path: Path) -> None:
    home = {"LIMINAL_HOME": str(tmp_path)}
    with pytest.raises(config.ConfigError, match=r"gradient\.long_cache_recent_tokens \(50000\)"):
        config.load(env={**home, "LIMINAL_SWAP_HIGH_TOKENS": "40000",
                         "LIMINAL_GRADIENT_LONG_CACHE_RECENT_TOKENS": "50000"})
    sources: dict[str, str] = {}
    config.load(env={**home, "LIMINAL_GRADIENT_RECENT_TOKENS": "30000"}, sources=sources)
    assert sources["gradient.long_cache_recent_tokens"] == \
        "env LIMINAL_GRADIENT_RECENT_TOKENS (gradient.recent_tokens)"
