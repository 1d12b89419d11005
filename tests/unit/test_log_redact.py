"""No credential in a log line, in whatever form a handshake carries it (``liminal.log.redact``):
at debug the WebSocket library logged ``GET /acp?token=<token>`` and ``Authorization: Bearer
<token>`` (issue 21)."""

from __future__ import annotations

import io
import json
import logging
import sys
from urllib.parse import quote

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from liminal import log
from liminal.access import TOKEN

# Anything a client can offer as a token (an HTTP token, as ``liminal.access`` takes it), drawn
# at the lengths a credential has rather than filtered to them: a filter that throws most draws
# away fails hypothesis' health check on a slow run.
_TCHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+.^_`|~-"
assert TOKEN.fullmatch(_TCHARS)
TOKENS = st.text(alphabet=_TCHARS, min_size=12, max_size=80)
UNQUOTED_TOKENS = st.text(alphabet=_TCHARS.replace("'", ""), min_size=12, max_size=80)
FORMS = [
    "< GET /acp?token={} HTTP/1.1",
    "< GET /acp?a=1&token={}&b=2 HTTP/1.1",
    "< GET /acp?%74oken={} HTTP/1.1",
    "< Authorization: Bearer {}",
    "< authorization: bearer {}",
    "< Authorization: Basic {}",
    "< Sec-WebSocket-Protocol: acp, liminal.token.{}",
    "> Sec-WebSocket-Protocol: liminal.token.{}",
    "Bearer {}",
]


@given(token=TOKENS, form=st.sampled_from(FORMS))
def test_no_form_of_a_credential_survives(token: str, form: str) -> None:
    if "?" in form:  # in a URL, as a client sends it (a bare ``&`` or ``#`` would end it)
        token = quote(token, safe="")
    assume(token not in form)
    assert token not in log.redact(form.format(token))


@given(token=UNQUOTED_TOKENS)
def test_a_header_mapping_repr_is_scrubbed(token: str) -> None:
    line = repr({"Authorization": f"Bearer {token}", "Host": "127.0.0.1"})
    assume(token not in "{'Authorization': 'Bearer ', 'Host': '127.0.0.1'}")
    assert token not in log.redact(line)


def test_a_registered_secret_is_scrubbed_wherever_it_is() -> None:
    log.secret("s3cr3t-value-0123456789")
    assert log.redact("x s3cr3t-value-0123456789 y") == "x [redacted] y"


@pytest.mark.parametrize("line", [
    "a bearer token is required (see $LIMINAL_HOME/serve-token)",
    "< GET /acp?session=abc&x=1 HTTP/1.1",
    "more than one credential; send the token once, in one form",
])
def test_what_is_not_a_credential_is_left_alone(line: str) -> None:
    assert log.redact(line) == line


def test_every_line_is_scrubbed_liminals_and_a_librarys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the configured renderers: a structlog line and a stdlib record (websockets')."""
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    log.configure("debug", json=True)
    try:
        log.get("liminal.test").info("refused", path="/acp?token=abcdefghijkl0123", headers={
            "Authorization": "Bearer abcdefghijkl4567"})
        logging.getLogger("websockets.server").debug("< %s: %s", "Authorization", "Bearer abcdefghijkl89ab")
        try:
            raise ValueError("Bearer abcdefghijklcdef")
        except ValueError:
            log.get("liminal.test").exception("failed")
    finally:
        log.configure("info")
    lines = [json.loads(line) for line in err.getvalue().splitlines()]
    assert len(lines) == 3
    text = err.getvalue()
    for secret in ("abcdefghijkl0123", "abcdefghijkl4567", "abcdefghijkl89ab", "abcdefghijklcdef"):
        assert secret not in text
    assert text.count("[redacted]") >= 4  # (the traceback quotes the raising line too)


def test_a_line_logged_before_configure_goes_to_stderr_scrubbed() -> None:
    """A process logs before it has read its settings (a store opened by a library user, the
    MCP server's first moments): structlog's own default wrote that line to stdout, which is
    the protocol's (and a command's ``--json``), and did not scrub it."""
    import subprocess

    script = ("from liminal import log; "
              "log.get('liminal.test').warning('early', auth='Bearer abcdefghijkl0123')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout == ""
    assert "early" in done.stderr and "[redacted]" in done.stderr
    assert "abcdefghijkl0123" not in done.stderr
