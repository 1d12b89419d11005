"""What reads the store for the model and for people: recall keys, memos, search, the thread list.

Beneath both ``liminal.kernel`` (the command center's /recall, /memo, /search, ``session/list``)
and ``liminal.mcp`` (the model's tools): when it lived in the kernel, the MCP server imported
the kernel while the kernel imported the MCP server's ``link``, a loop between the packages.
"""
