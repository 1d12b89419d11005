"""The bearer token of ``liminal serve``: made on first run, kept in ``$LIMINAL_HOME/serve-token``
(0600), required on every connection in one of three forms, since a browser cannot set headers
on a WebSocket:

- ``Authorization: Bearer <token>``;
- a ``Sec-WebSocket-Protocol`` offer ``liminal.token.<token>`` (beside ``acp``, which is chosen);
- ``?token=<token>`` in the URL (it ends up in logs and history more easily: the last resort).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

TOKEN_FILE = "serve-token"
PROTOCOL_PREFIX = "liminal.token."


def load_or_create(home: Path) -> str:
    """The token, made (32 random bytes, URL-safe) and written 0600 the first time."""
    path = home / TOKEN_FILE
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text().strip()
        if text:
            return text
        path.unlink()
        return load_or_create(home)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def offered(authorization: str | None, protocols: Iterable[str], path: str) -> list[str]:
    """Every token the request carries, in the three forms."""
    found: list[str] = []
    if authorization and authorization.lower().startswith("bearer "):
        found.append(authorization[7:].strip())
    found += [p.strip()[len(PROTOCOL_PREFIX):] for p in protocols if p.strip().startswith(PROTOCOL_PREFIX)]
    found += parse_qs(urlsplit(path).query).get("token", [])
    return found


def accepted(token: str, candidates: Iterable[str]) -> bool:
    """Constant time in the token's content: a wrong guess learns nothing from the timing."""
    ok = False
    for candidate in candidates:
        ok |= hmac.compare_digest(candidate.encode(), token.encode())
    return ok
