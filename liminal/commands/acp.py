"""``liminal acp -- AGENT_COMMAND...``: placeholder until the proxy lands."""

from __future__ import annotations

import argparse

from liminal.config import Settings

HELP = "run as an ACP agent: spawn AGENT_COMMAND and proxy every frame"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", nargs=argparse.REMAINDER, help="-- AGENT_COMMAND [ARGS...]")


def run(args: argparse.Namespace, settings: Settings) -> int:
    raise NotImplementedError
