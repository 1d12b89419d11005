"""The way from frames to the store: the spool the proxy writes, the worker that tails it, the
indexer and the deriver. The backends are ``liminal.store``; neither package imports the kernel."""
