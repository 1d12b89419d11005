"""Codex rollouts: where they are (``rollout``), the gradient on them (``gradient``), and the
harness the kernel uses (``live.CodexSessions``). See docs/formats.md, "Codex rollouts"."""
