"""liminal: a context manager for coding-agent CLIs, sitting in their ACP stream."""

__version__ = "0.1.0"
