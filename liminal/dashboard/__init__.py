"""The dashboard: a read-only web view of the store (threads, context, swaps, savings, search),
served by ``liminal serve`` beside ``/acp`` and by ``liminal dashboard`` (docs/dashboard.md)."""
