"""A minimal ACP agent that streams as fast as it can, so the proxy is what gets measured.

``session/prompt`` with text ``chunks:N`` answers with N ``agent_message_chunk`` notifications
(~200 bytes each, written in 256 KiB blocks) and then ``end_turn``.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, rpc_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, object] = {"protocolVersion": 1, "agentCapabilities": {}}
        elif method == "session/new":
            result = {"sessionId": "bench-session"}
        elif method == "session/prompt":
            text = " ".join(b.get("text", "") for b in params.get("prompt", []))
            n = int(text.split("chunks:", 1)[1].split()[0]) if "chunks:" in text else 0
            sid = params["sessionId"]
            block: list[bytes] = []
            size = 0
            for i in range(n):
                frame = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
                    "sessionId": sid, "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": f"token {i} of a long streamed answer "
                                                            "about the flux capacitor, "}}}},
                    separators=(",", ":")).encode() + b"\n"
                block.append(frame)
                size += len(frame)
                if size > 256 * 1024:
                    out.write(b"".join(block))
                    block, size = [], 0
            out.write(b"".join(block))
            result = {"stopReason": "end_turn"}
        elif rpc_id is not None:
            out.write(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "error": {
                "code": -32601, "message": "no"}}).encode() + b"\n")
            out.flush()
            continue
        else:
            continue
        out.write(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result},
                             separators=(",", ":")).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
