"""``liminal mcp (--thread ID | --bind NONCE)``: liminal's tools for the model, an MCP server on stdio.

Started by the CLI, not by hand: liminal adds it to the ``mcpServers`` of every session it
forwards (``liminal.kernel.modeltools``), as ``python -m liminal.mcp``, which starts faster.
This command is the same server, for trying it by hand.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from liminal.config import Settings

HELP = "serve liminal's tools to the model (MCP over stdio; liminal starts it)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from liminal.mcp.args import add_binding

    add_binding(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from liminal.mcp.args import checked
    from liminal.mcp.server import serve
    from liminal.mcp.tools import LiminalTools

    problem = checked(args.thread, args.bind)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    tools = LiminalTools(settings.home, None, args.thread, args.bind, _settings=settings)
    return serve(tools)
