"""``liminal serve``: ACP over WebSocket (``server``), the bearer token (``token``), and the
client leg a WebSocket connection is to a proxy (``leg``). See docs/operations.md, "serve"."""
