"""What every CLI's gradient shares: the bands and the cut (``bands``), recall keys
(``recall``), the summary of the ancient band (``summarize``). Each CLI's gradient lives with the
CLI: ``liminal.harness.claude.gradient``, ``liminal.harness.codex.gradient`` (docs/gradient.md).
"""

from liminal.gradient.bands import MARKER_CHARS, Band, Cutter, already_cut
from liminal.gradient.recall import KEY_IN_MARKER, RecallError, RecallKey, marker
from liminal.gradient.summarize import ExtractiveSummarizer, Summarizer, TurnDigest

__all__ = [
    "KEY_IN_MARKER", "MARKER_CHARS", "Band", "Cutter", "ExtractiveSummarizer", "RecallError",
    "RecallKey", "Summarizer", "TurnDigest", "already_cut", "marker",
]
