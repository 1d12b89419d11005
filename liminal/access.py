"""Who may reach liminal's listeners (``liminal serve``, ``liminal dashboard``): loopback, and the bearer
token, made on first run, kept in ``$LIMINAL_HOME/serve-token``
(0600), required on every connection in one of three forms, since a browser cannot set headers
on a WebSocket:

- ``Authorization: Bearer <token>``;
- a ``Sec-WebSocket-Protocol`` offer ``liminal.token.<token>`` (beside ``acp``, which is chosen);
- ``?token=<token>`` in the URL (it ends up in logs and history more easily: the last resort;
  liminal's own log never shows it, ``liminal.log``).

Exactly one: a request that carries two (two ``token`` parameters, a header and a parameter, two
offers) is refused before any is compared, whether they agree or not, rather than settling which
one counts: a proxy in front that checks the first, and liminal any, would disagree on who is
in. An ``Authorization`` header of another scheme (``Basic``, from a proxy in front) is not one
of liminal's and is left alone.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import secrets
from collections.abc import Iterable
from http import HTTPStatus
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

TOKEN_FILE = "serve-token"
PROTOCOL_PREFIX = "liminal.token."


# What all three forms can carry: an HTTP token (RFC 9110), as a subprotocol must be.
TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


class TokenError(Exception):
    """The token file is there but cannot be read as a token (one line for the user)."""


def load_or_create(home: Path) -> str:
    """The token, made (32 random bytes, URL-safe) and written 0600 the first time; TokenError
    when the file is there but holds no token."""
    path = home / TOKEN_FILE
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read(home, path)
    except OSError as exc:
        raise TokenError(f"{path}: cannot be made: {exc.strerror or exc}") from exc
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def _read(home: Path, path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
        if not text:
            path.unlink()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise TokenError(f"{path}: {reason}; delete it for a new one") from exc
    if not text:
        return load_or_create(home)
    if not TOKEN.fullmatch(text):
        raise TokenError(f"{path}: not a token (letters, digits and !#$%&'*+.^_`|~- only, one "
                         "line, as a browser must send it); delete it for a new one")
    return text


def offered(authorization: str | None, protocols: Iterable[str], path: str) -> list[str]:
    """Every token the request carries, in the three forms (an empty one too: it is one)."""
    found: list[str] = []
    scheme, _, credential = (authorization or "").strip().partition(" ")
    if scheme.lower() == "bearer":
        found.append(credential.strip())
    found += [p.strip()[len(PROTOCOL_PREFIX):] for p in protocols if p.strip().startswith(PROTOCOL_PREFIX)]
    found += parse_qs(urlsplit(path).query, keep_blank_values=True).get("token", [])
    return found


def accepted(token: str, candidates: Iterable[str]) -> bool:
    """Constant time in the token's content: a wrong guess learns nothing from the timing."""
    ok = False
    for candidate in candidates:
        ok |= hmac.compare_digest(candidate.encode(), token.encode())
    return ok

def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origins(setting: str) -> set[str]:
    """``serve.origins``: the browser origins allowed, comma-separated, without a final slash."""
    return {o.strip().rstrip("/") for o in setting.split(",") if o.strip()}


def refusal(token: str, allowed: set[str], origin: str | None, authorization: str | None,
            protocols: Iterable[str], path: str) -> tuple[HTTPStatus, str] | None:
    """Why a request may not in, or None: the one rule of every listener (``/acp`` and the
    dashboard). A foreign ``Origin`` first (a web page the user happens to visit), then more
    than one credential (refused before any is compared), then no token or a wrong one."""
    if origin is not None and origin.rstrip("/") not in allowed:
        return HTTPStatus.FORBIDDEN, "origin not allowed (serve.origins)"
    credentials = offered(authorization, protocols, path)
    if len(credentials) > 1:
        return HTTPStatus.BAD_REQUEST, "more than one credential; send the token once, in one form"
    if not accepted(token, credentials):
        return HTTPStatus.UNAUTHORIZED, f"a bearer token is required (see $LIMINAL_HOME/{TOKEN_FILE})"
    return None
