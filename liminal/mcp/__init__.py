"""``liminal mcp``: the tools liminal gives the model, as an MCP server over stdio.

``link`` is what the proxy and the server share through ``$LIMINAL_HOME/mcp`` (which thread a
server is for, the slash commands it leaves for the proxy); ``protocol`` is the MCP side,
``tools`` what each tool does. The proxy's side (adding the server to every session it
forwards, running the slash commands between turns) is ``liminal.kernel.modeltools``.
"""
