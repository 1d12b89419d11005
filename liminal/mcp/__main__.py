"""``python -m liminal.mcp``: what liminal puts in a session's ``mcpServers``.

The same server as ``liminal mcp``, started without the command line's set-up (every command's
module, the config's checks, the log): a session's next prompt waits for its MCP servers, and
those costs are paid when a tool first needs the settings instead.
"""

from liminal.mcp.server import main

raise SystemExit(main())
