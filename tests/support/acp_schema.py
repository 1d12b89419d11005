"""Every frame liminal writes, checked against ACP's JSON Schema as the TypeScript SDK ships it
(``[schemas.acp-sdk]`` in fixtures/harness/pins.toml, installed by scripts/install-harness).

The schema is read strictly: a member the schema does not name fails, unless it is an
extension by the protocol's own rules (``_meta``, or a name that starts with ``_``). The
schema itself leaves objects open, so without that a made-up field would pass unseen. A
request's or notification's ``params`` are checked against the type its method names
(``x-method``), a result against the response type of the request it answers; a method whose
name starts with ``_`` is an extension and passes.

``frames_problems`` reads one connection both ways: what the client sent (to know which method
each answer answers) and what it received; the same for the agent's side.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[2]
SDK = Path("acp-sdk") / "node_modules" / "@agentclientprotocol" / "sdk" / "schema"

# Members JSON-RPC itself puts on a frame, by kind.
ENVELOPE = {"request": {"jsonrpc", "id", "method", "params"}, "notification": {"jsonrpc", "method", "params"},
            "result": {"jsonrpc", "id", "result"}, "error": {"jsonrpc", "id", "error"}}


def schema_file(version: str = "v1", unstable: bool = True) -> Path | None:
    """The pinned SDK's schema file, or None when scripts/install-harness has not installed it."""
    harness = Path(os.environ.get("LIMINAL_HARNESS_DIR") or ROOT / ".harness").expanduser()
    path = harness / SDK / version / ("schema.unstable.json" if unstable else "schema.json")
    return path if path.is_file() else None


def _strict(node: Any) -> Any:
    """The schema with every object value closed: each subschema in a value position (a
    property's, an array's items, a map's values) is wrapped so that a member nothing in it
    evaluates fails, ``_``-names excepted. The wrapper sits where the value is used, never
    inside an ``allOf``/``anyOf`` branch, so members that a sibling branch names still count."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _strict(value) for key, value in node.items()}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: _closed(sub) for name, sub in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _closed(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _closed(out["additionalProperties"])
    return out


# What makes a subschema say which members an object has; one with none of these (``rawInput``,
# an error's ``data``: any JSON) stays open.
_SHAPED = ("$ref", "properties", "allOf", "anyOf", "oneOf")


def _closed(sub: Any) -> Any:
    if not isinstance(sub, dict) or sub.get("additionalProperties") is True or not any(k in sub for k in _SHAPED):
        return sub
    return {"allOf": [sub], "patternProperties": {"^_": {}}, "unevaluatedProperties": False}


class SchemaChecker:
    """One schema file, its types by method, and a validator per type made when first used."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.defs = _strict(schema["$defs"])
        self.params: dict[tuple[str, str], str] = {}  # (method, "request"|"notification") -> type
        self.results: dict[str, str] = {}
        for name, body in schema["$defs"].items():
            method = body.get("x-method")
            if not isinstance(method, str):
                continue
            if name.endswith("Response"):
                self.results[method] = name
            elif name.endswith("Notification"):
                self.params[(method, "notification")] = name
            else:
                self.params[(method, "request")] = name

    @cache  # noqa: B019 - one checker per schema file, kept for the session
    def _validator(self, name: str) -> Draft202012Validator:
        return Draft202012Validator({"$defs": self.defs, **_closed({"$ref": f"#/$defs/{name}"})})

    def _against(self, name: str, value: Any, where: str) -> list[str]:
        return [f"{where}: {error.message} at {'/'.join(map(str, error.absolute_path)) or '(top)'}"
                for error in self._validator(name).iter_errors(value)]

    def problems(self, frame: dict[str, Any], answers: str | None) -> list[str]:
        """What in ``frame`` is outside the schema; ``answers``: the method of the request a
        response answers (None when no request of that id was seen)."""
        method = frame.get("method")
        if isinstance(method, str):
            kind = "request" if "id" in frame else "notification"
            where = f"{kind} {method}"
            wrong = [f"{where}: member {key!r} is not JSON-RPC's" for key in frame.keys() - ENVELOPE[kind]]
            if method.startswith("_"):
                return wrong
            name = self.params.get((method, kind))
            if name is None:
                return [*wrong, f"{where}: no such {kind} in the schema (an extension's name starts with _)"]
            return wrong + self._against(name, frame.get("params"), where)
        kind = "error" if "error" in frame else "result"
        where = f"{kind} of {answers or 'an unknown request'} (id {frame.get('id')!r})"
        wrong = [f"{where}: member {key!r} is not JSON-RPC's" for key in frame.keys() - ENVELOPE[kind]]
        if kind == "error":
            error = frame.get("error")
            ok = (isinstance(error, dict) and isinstance(error.get("code"), int)
                  and isinstance(error.get("message"), str) and not error.keys() - {"code", "message", "data"})
            return wrong + ([] if ok else [f"{where}: not a JSON-RPC error object"])
        if answers is None:
            return [*wrong, f"{where}: answers no request sent on this connection"]
        if answers.startswith("_"):
            return wrong
        name = self.results.get(answers)
        if name is None:
            return [*wrong, f"{where}: no response type for {answers} in the schema"]
        return wrong + self._against(name, frame.get("result"), where)


@cache
def checker(version: str = "v1", unstable: bool = True) -> SchemaChecker | None:
    """The checker, or None without the pinned SDK (scripts/install-harness installs it); under
    CI (``CI=true``) its absence fails the test: there the check is the point."""
    path = schema_file(version, unstable)
    if path is None:
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            raise AssertionError("the ACP schema is not installed: scripts/install-harness acp-sdk")
        return None
    return SchemaChecker(json.loads(path.read_text(encoding="utf-8")))


Side = tuple[Sequence[bytes | str], Sequence[bytes | str], Sequence[bytes | str]]


def assert_conforms(sides: Iterable[Side]) -> None:
    """Every frame liminal wrote to each side conforms (``frames_problems``); each side given as
    (what it sent, what it received, what the other side sent). Passes unchecked without the
    schema, outside CI."""
    check = checker()
    if check is None:
        return
    problems = [problem for sent, received, passed_on in sides
                for problem in frames_problems(check, sent, received, passed_on)]
    assert not problems, "frames outside ACP's schema and its extension rules:\n" + "\n".join(problems)


def _objects(lines: Iterable[bytes | str]) -> list[dict[str, Any]]:
    found = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _without_session_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_session_ids(v) for k, v in value.items() if k != "sessionId"}
    if isinstance(value, list):
        return [_without_session_ids(v) for v in value]
    return value


def frames_problems(check: SchemaChecker, sent: Sequence[bytes | str], received: Sequence[bytes | str],
                    passed_on: Sequence[bytes | str] = ()) -> list[str]:
    """What liminal wrote to one side (``received`` by it) that the schema does not allow;
    ``sent``: what that side wrote to liminal, which names the methods liminal's answers answer;
    ``passed_on``: what the other side wrote to liminal: a frame liminal forwarded as it came
    (but for the session id it maps) is that side's, not liminal's, and is not judged here."""
    # A request's id may come again once it is answered (a client per process, ids from 1):
    # each answer takes the oldest request of its id still open.
    asked: dict[str, deque[str]] = defaultdict(deque)
    for m in _objects(sent):
        if "id" in m and isinstance(m.get("method"), str):
            asked[json.dumps(m["id"])].append(m["method"])
    theirs = {json.dumps(_without_session_ids(m), sort_keys=True) for m in _objects(passed_on)}
    found = []
    for frame in _objects(received):
        if theirs and json.dumps(_without_session_ids(frame), sort_keys=True) in theirs:
            continue
        waiting = asked.get(json.dumps(frame.get("id"))) if "method" not in frame else None
        answers = waiting.popleft() if waiting else None
        found.extend(check.problems(frame, answers))
    return found
