"""The compression gradient for Claude Code: plan, render, validate and write a smaller session.

The swap's entry points (see docs/gradient.md):
``rewrite_session(source, target_tokens=None, new_id=None, ...) -> RewriteResult`` writes the
new session or raises with nothing written; ``prepare(...)`` does all but the write. What a cut
marker names comes back through ``liminal.harness.claude.recall``.
"""

from liminal.harness.claude.gradient.render import Preamble
from liminal.harness.claude.gradient.rewrite import (
    Prepared,
    RewriteResult,
    prepare,
    rewrite_session,
)
from liminal.harness.claude.gradient.validate import ValidationError
from liminal.sessionfiles import RewriteError

__all__ = ["Preamble", "Prepared", "RewriteError", "RewriteResult", "ValidationError", "prepare", "rewrite_session"]
