"""The compression gradient: plan, render, validate and write a smaller Claude Code session.

The swap manager's entry points (see docs/gradient.md):
``rewrite_session(source, target_tokens=None, new_id=None, ...) -> RewriteResult`` writes the
new session or raises with nothing written; ``prepare(...)`` does all but the write;
``resolve(recall_key)`` returns what a cut marker names, from the original file.
"""

from liminal.gradient.recall import RecallError, RecallKey, resolve
from liminal.gradient.rewrite import Prepared, RewriteError, RewriteResult, prepare, rewrite_session
from liminal.gradient.summarize import ExtractiveSummarizer, Summarizer, TurnDigest
from liminal.gradient.validate import ValidationError

__all__ = [
    "ExtractiveSummarizer", "Prepared", "RecallError", "RecallKey", "RewriteError",
    "RewriteResult", "Summarizer", "TurnDigest", "ValidationError", "prepare", "resolve",
    "rewrite_session",
]
