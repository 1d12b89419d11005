"""The ``liminal`` command line: one sub-command per module in ``liminal/commands/``.

A command module provides ``HELP`` (one line), ``add_arguments(parser)``, optionally
``overrides(args) -> {dotted setting: value}`` for the flags that map to settings, and
``run(args, settings) -> int``. Command modules import their heavy dependencies inside ``run``
so that ``liminal --help`` and ``liminal acp`` start fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from liminal import __version__, config, log, private
from liminal.transport.stdio import reserve_standard_fds

# Order is the order shown in --help.
COMMANDS = ("acp", "serve", "inspect", "compress", "threads", "history", "search", "swaps", "dashboard",
            "config", "doctor", "mcp")


def _command_modules() -> dict[str, ModuleType]:
    modules: dict[str, ModuleType] = {}
    for name in COMMANDS:
        try:
            modules[name] = importlib.import_module(f"liminal.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"liminal.commands.{name}":
                raise
    return modules


class Parser(argparse.ArgumentParser):
    """A command line that is not understood is one line on stderr and exit 2, like a bad setting
    (argparse's own prints the whole usage first). Its sub-commands' parsers are of this class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _path(text: str) -> Path:
    """A path flag's value: never empty (an unset variable), which Path would take for "."."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path is not accepted")
    return Path(text)


def build_parser(modules: dict[str, ModuleType]) -> argparse.ArgumentParser:
    parser = Parser(
        prog="liminal",
        description="A context manager for coding-agent CLIs that speak ACP.",
    )
    parser.add_argument("--version", action="version", version=f"liminal {__version__}")
    parser.add_argument("--log-level", help="debug, info, warning, error (default: info)")
    parser.add_argument("--home", type=_path, help="liminal's home folder (default: ~/.liminal)")
    parser.add_argument("--config", type=_path, help="config file (default: HOME/config.toml)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in modules.items():
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. A reader that stops reading (``liminal history T | head``) ends it as
    it ends a Unix tool: quietly, exit 141 (128 + SIGPIPE), whichever command was writing."""
    try:
        try:
            code = _main(argv)
        finally:  # argparse's --help and errors exit through here too
            sys.stdout.flush()  # here, not at the interpreter's exit, where it is only reported
    except BaseException as exc:
        if not _closed_pipe(exc):
            raise
        _stdout_to_devnull()
        return 128 + signal.SIGPIPE
    return code


def _closed_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` is stdout's reader gone (an exception group of nothing else, too: a
    command's writes may happen in a task group)."""
    if isinstance(exc, BaseExceptionGroup):
        rest = exc.split(BrokenPipeError)[1]
        return rest is None and _stdout_gone()
    return isinstance(exc, BrokenPipeError) and _stdout_gone()


def _stdout_gone() -> bool:
    """Whether the reader of stdout has closed its end (a broken pipe of another kind, the
    index worker's, is a fault to report, not the end of a command's output)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return True  # no stdout to ask: what failed was writing to it


def _stdout_to_devnull() -> None:
    """What Python's documentation advises: the rest of the output (the buffer flushed at exit)
    goes nowhere instead of failing again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _main(argv: Sequence[str] | None) -> int:
    reserve_standard_fds()  # before anything is opened (liminal.transport.stdio)
    private.tighten_umask()  # before anything is written (liminal.private)
    modules = _command_modules()
    parser = build_parser(modules)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    module = modules[args.command]
    if args.config is not None:  # handed on to the MCP server, which starts in another folder
        args.config = args.config.expanduser().absolute()
    if os.environ.get("PYTHONPATH"):
        # Inherited by every process liminal starts, some in another folder (an agent starts
        # liminal's MCP server in the session's, and Gemini CLI gives it the PYTHONPATH it
        # inherited, not the one the server's spec names): relative, it would find other code.
        from liminal.kernel.modeltools import absolute_paths

        os.environ["PYTHONPATH"] = absolute_paths(os.environ["PYTHONPATH"])
    overrides = {"home": args.home, "log_level": args.log_level}
    if hasattr(module, "overrides"):
        overrides.update(module.overrides(args))
    try:
        sources: dict[str, str] = {}
        settings = config.load(overrides, config_file=args.config, sources=sources)
        args.setting_sources = sources  # for ``liminal config``
    except config.ConfigError as exc:
        print(f"liminal: configuration error: {exc}", file=sys.stderr)
        return 2
    log.configure(settings.log_level)
    if settings.home.exists() or args.command == "acp":
        private.secure_home(settings.home)
    result: int = module.run(args, settings)
    return result
