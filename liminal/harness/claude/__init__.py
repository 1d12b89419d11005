"""Claude Code session files: where they are, a lossless index of their lines, the conversation.

``locate(ref)`` finds a session by id or path; ``read_session(location)`` indexes it;
``build(session)`` gives the conversation as Claude Code assembles it; ``measure`` and
``estimate`` give its context size and a token estimate by category. See docs/formats.md.
"""

from liminal.harness.claude.conversation import Conversation, ConversationError, Turn, build
from liminal.harness.claude.paths import SessionLocation, SessionNotFound, encode_cwd, locate
from liminal.harness.claude.records import Record, SessionFile, SessionFormatError, read_session
from liminal.harness.claude.tokens import Calibration, context_size, estimate, measure

__all__ = [
    "Calibration", "Conversation", "ConversationError", "Record", "SessionFile",
    "SessionFormatError", "SessionLocation", "SessionNotFound", "Turn", "build", "context_size",
    "encode_cwd", "estimate", "locate", "measure", "read_session",
]
