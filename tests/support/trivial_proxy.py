"""A trivial ACP proxy component, as a conductor runs one (the proxy-chains RFD): it answers
``proxy/initialize`` by initializing its successor through ``proxy/successor``, and passes
every other message on unchanged, wrapping what goes to its successor and unwrapping what
comes from it. Stdlib only; a test's own second component in a chain beside liminal.

Every line it reads or writes is appended to ``$TRIVIAL_PROXY_LOG`` (``<`` read, ``>`` written),
so a test sees what the conductor really sends a proxy. Both spellings of the methods are
taken (``proxy/`` and the ``_proxy/`` of conductors before 5.0.0); it answers in the one it was
initialized with.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from typing import Any

LOG = open(os.environ["TRIVIAL_PROXY_LOG"], "a") if os.environ.get("TRIVIAL_PROXY_LOG") else None  # noqa: SIM115
lock = threading.Lock()
prefix = "proxy/"
ids = itertools.count(1)
# Our requests to the successor (by our id): the id the predecessor gave the request.
forwarded: dict[int, Any] = {}


def log(mark: str, line: str) -> None:
    if LOG is not None:
        LOG.write(f"{mark} {line}\n")
        LOG.flush()


def send(message: dict[str, Any]) -> None:
    line = json.dumps(message)
    with lock:
        log(">", line)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def to_successor(message: dict[str, Any]) -> None:
    """A message from the predecessor, wrapped for the successor (its answer comes back as the
    answer to our own ``proxy/successor`` request)."""
    envelope = {"method": message["method"], **({"params": message["params"]} if "params" in message else {})}
    if "id" in message:
        own = next(ids)
        forwarded[own] = message["id"]
        send({"jsonrpc": "2.0", "id": f"trivial-{own}", "method": prefix + "successor", "params": envelope})
    else:
        send({"jsonrpc": "2.0", "method": prefix + "successor", "params": envelope})


def main() -> None:
    global prefix
    for raw in sys.stdin:
        raw = raw.strip()
        if not raw:
            continue
        log("<", raw)
        message = json.loads(raw)
        method = message.get("method")
        if method in ("proxy/initialize", "_proxy/initialize"):
            prefix = method.split("initialize")[0]
            to_successor({**message, "method": "initialize"})
        elif method in ("proxy/successor", "_proxy/successor"):
            # From the successor: unwrapped for the predecessor; its answer goes back as ours.
            inner = message.get("params") or {}
            out = {"jsonrpc": "2.0", "method": inner["method"], **({"params": inner["params"]} if "params" in inner else {})}
            if "id" in message:
                out["id"] = message["id"]
            send(out)
        elif method is not None:
            to_successor(message)
        elif isinstance(message.get("id"), str) and message["id"].startswith("trivial-"):
            answered = forwarded.pop(int(message["id"].removeprefix("trivial-")), None)
            send({**message, "id": answered})
        else:
            send(message)  # an answer to a request the successor sent us: the conductor routes it


if __name__ == "__main__":
    main()
