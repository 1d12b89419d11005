"""The dashboard's HTTP answers, for ``liminal serve`` (beside ``/acp``) and ``liminal dashboard``.

Both serve it through ``websockets``' handshake hook (``process_request``), the way ``/healthz``
is answered: GET only, one answer per connection, no second HTTP server in the package.

- ``/dashboard/`` and its three files (``static/``): the page, the same for everyone and holding
  no data, so they are served without the token; the page takes the token from its address's
  fragment (``#token=...``, which a browser never sends, so it is in no log and no Referer),
  keeps it in the tab's ``sessionStorage``, and sends it on every data request.
- ``/dashboard/api/...``: the data, JSON, under the rules of ``/acp``: exactly one credential
  (``Authorization: Bearer``, or ``?token=``), the right token (401 otherwise, 400 for two), and
  an ``Origin``, when a browser sends one, of the dashboard itself or listed in
  ``serve.origins`` (403: a page elsewhere must not read a person's history).

Every answer is read from the store opened read-only (``liminal.dashboard.reader``); a request
that fails is an error answer and a log line, never the server's end.
"""

from __future__ import annotations

from http import HTTPStatus
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from liminal import access as tokens
from liminal import log
from liminal.config import Settings
from liminal.dashboard.reader import NotFound, Reader
from liminal.dashboard.views import Window

logger = log.get("liminal.dashboard")
PREFIX = "/dashboard"
API = PREFIX + "/api/"
STATIC = {"": ("index.html", "text/html; charset=utf-8"),
          "index.html": ("index.html", "text/html; charset=utf-8"),
          "app.js": ("app.js", "text/javascript; charset=utf-8"),
          "app.css": ("app.css", "text/css; charset=utf-8")}
# The page runs only its own script and style, talks only to this server, and is never framed.
SECURITY = [("Content-Security-Policy",
             "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
             "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
            ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
            ("X-Frame-Options", "DENY")]


def handles(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def _response(status: HTTPStatus, body: bytes, content_type: str, *extra: tuple[str, str]) -> Response:
    headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body))),
                       ("Cache-Control", "no-store"), *SECURITY, *extra])
    return Response(int(status), status.phrase, headers, body)


def _json(value: Any, status: HTTPStatus = HTTPStatus.OK) -> Response:
    return _response(status, orjson.dumps(value), "application/json")


def _error(status: HTTPStatus, why: str) -> Response:
    return _json({"error": why}, status)


def _window(query: dict[str, str]) -> Window:
    """The transcript's turns a request asks for (``views.Window``): ``lo`` and ``hi``, or around
    a message (``msg``) or a turn (``turn``); numbers that are not are left out."""
    def number(name: str) -> int | None:
        value = query.get(name, "")
        return int(value) if value.isdigit() and len(value) < 10 else None

    return Window(lo=number("lo"), hi=number("hi"), at=query.get("msg") or None, turn=number("turn"))


class Dashboard:
    """One per server: its reader keeps the store open between requests."""

    def __init__(self, settings: Settings, token: str) -> None:
        self.settings = settings
        self.token = token
        self.origins = tokens.origins(settings.serve.origins)
        self.reader = Reader(settings)
        self._files: dict[str, bytes] = {}

    async def aclose(self) -> None:
        await self.reader.aclose()

    def _file(self, name: str) -> bytes:
        if name not in self._files:
            self._files[name] = resources.files("liminal.dashboard").joinpath("static", name).read_bytes()
        return self._files[name]

    def _refused(self, request: Request) -> Response | None:
        """The rules of ``/acp`` (``liminal.serve.server``) for a data request."""
        refused = tokens.refusal(self.token, self.origins | self._own_origins(request),
                                 request.headers.get("Origin"), request.headers.get("Authorization"), [],
                                 request.path)
        return None if refused is None else _error(*refused)

    @staticmethod
    def _own_origins(request: Request) -> set[str]:
        """The dashboard's own page (a browser may send its Origin on its own requests), when it
        was reached on loopback: a page on another name is not the dashboard's."""
        from liminal.access import is_loopback

        host = request.headers.get("Host") or ""
        name = urlsplit(f"//{host}").hostname or ""
        return {f"http://{host}"} if is_loopback(name) else set()

    async def answer(self, request: Request) -> Response:
        """The answer to one GET under ``/dashboard``."""
        split = urlsplit(request.path)
        path = split.path
        if path == PREFIX:
            return _response(HTTPStatus.MOVED_PERMANENTLY, b"", "text/plain", ("Location", PREFIX + "/"))
        if not path.startswith(API):
            found = STATIC.get(path.removeprefix(PREFIX + "/"))
            if found is None:
                return _error(HTTPStatus.NOT_FOUND, "no such page")
            return _response(HTTPStatus.OK, self._file(found[0]), found[1])
        refused = self._refused(request)
        if refused is not None:
            logger.warning("dashboard request refused", status=refused.status_code, path=path)
            return refused
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        try:
            return _json(await self._data(path.removeprefix(API), query))
        except NotFound as exc:
            return _error(HTTPStatus.NOT_FOUND, str(exc))
        except Exception as exc:
            return self._failed(path, exc)

    async def _data(self, route: str, query: dict[str, str]) -> Any:
        parts = [unquote(p) for p in route.split("/")]
        reader = self.reader
        if parts == ["threads"]:
            return await reader.threads(archived=query.get("archived") == "1")
        if parts == ["stamp"]:
            return {"stamp": await reader.stamp(query.get("thread") or None)}
        if parts == ["search"]:
            return await reader.search(query.get("q", ""))
        if parts == ["recall"]:
            return await reader.recall(query.get("key", ""))
        if len(parts) == 2 and parts[0] == "thread":
            return await reader.thread(parts[1], _window(query))
        if len(parts) == 3 and parts[0] == "thread" and parts[2] == "turns":
            return await reader.turns(parts[1], _window(query))
        if len(parts) == 3 and parts[0] == "thread" and parts[2] == "bands":
            return await reader.bands(parts[1])
        if len(parts) == 3 and parts[0] == "thread" and parts[2] == "message":
            return await reader.message(parts[1], query.get("id", ""))
        raise NotFound("no such data")

    def _failed(self, path: str, exc: Exception) -> Response:
        from liminal.gradient.recall import RecallError
        from liminal.store.base import StoreError

        if isinstance(exc, RecallError):
            return _error(HTTPStatus.NOT_FOUND, str(exc))
        if isinstance(exc, StoreError):
            reason = (str(exc).splitlines() or [""])[0][:300]
            logger.warning("dashboard: the store cannot be read", path=path, error=reason)
            return _error(HTTPStatus.SERVICE_UNAVAILABLE, f"the store cannot be read: {reason}")
        logger.exception("dashboard request failed", path=path)
        return _error(HTTPStatus.INTERNAL_SERVER_ERROR, "an error inside liminal: its log has the details")
