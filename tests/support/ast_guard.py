"""``ast.parse`` in the test process, safe from a finalizer that parses too.

CPython 3.11 keeps the AST converter's recursion counter in state shared by every call: a
finalizer run by the cyclic collector in the middle of one ``ast.parse`` that itself parses
(formatting a traceback does, for its carets: pytest's hook for unraisable exceptions, a logger)
leaves the counter where the inner call ended, and the outer call raises ``SystemError: AST
constructor recursion depth mismatch``. When the outer call is pytest drawing a failed test's
source, the report cannot be made and xdist ends the whole run with an internal error, the
failure itself unseen. With the collector paused for the length of a parse, no finalizer of
a cycle runs inside one.
"""

from __future__ import annotations

import ast
import gc
from typing import Any

_parse = ast.parse


def _parse_without_collecting(*args: Any, **kwargs: Any) -> Any:
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse(*args, **kwargs)
    finally:
        if enabled:
            gc.enable()


def install() -> None:
    ast.parse = _parse_without_collecting
