"""Gemini CLI's session files, read (``chatfile``): where they are, their lines kept whole, the
conversation, usage and turn end the CLI makes of them. No harness the kernel uses yet (nothing
writes them). See docs/formats.md, "Gemini CLI session files"."""
