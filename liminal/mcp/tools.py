"""What each of ``liminal mcp``'s tools does: a thin layer over the store, the cache and ``link``.

The store and the cache are opened when a tool first needs them, not at start: every resume of a
session restarts its MCP servers and the next prompt waits for the slowest to be ready.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from liminal.mcp import link
from liminal.mcp.protocol import Tool, ToolError

if TYPE_CHECKING:
    import asyncio

    from liminal.config import Settings
    from liminal.lookup.recaller import Recaller
    from liminal.store.base import Store

# What the model may ask liminal to do to its own context (the commands meant for people, such
# as /context or /search, have tools of their own or are not offered).
SLASH = {"mark": "NAME", "clear": "[MARK]", "fork": "[MARK]", "undo": ""}
RECALL_CHARS = 60_000  # one answer's text at most: Claude Code cuts an MCP answer past ~25k tokens
SEARCH_LIMIT = 200  # finds a search_history answer holds at most (a long one is a dump)

INSTRUCTIONS = (
    "liminal keeps this conversation's full history. Tool output cut from the context ends in a "
    "marker with a key: `recall` returns the original text. `search_history` finds anything said "
    "earlier, also what is no longer in the context. `memo_save` keeps a note for later "
    "conversations; `memo_find` finds them. `slash` marks, rewinds, forks or undoes the context "
    "once the current turn ends. `scratchpad` reads and changes this conversation's scratchpad: "
    "notes you and the user keep, which stay at the head of your context whatever liminal "
    "compresses or cuts."
)
SCRATCHPAD_ACTIONS = ("read", "replace", "append")


@dataclass
class LiminalTools:
    home: Path | None = None  # --home; else from the settings
    config_file: Path | None = None  # --config
    thread: str | None = None  # --thread
    nonce: str | None = None  # --bind: the thread is named later (liminal.mcp.link)
    _settings: Settings | None = None
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    _store: Store | None = None
    _recaller: Recaller | None = None
    # Calls run concurrently: the first few must not each open a store (made on the calls' loop).
    _opening: asyncio.Lock | None = None

    def _lock(self) -> asyncio.Lock:
        if self._opening is None:
            import asyncio

            self._opening = asyncio.Lock()
        return self._opening

    @property
    def settings(self) -> Settings:
        """Read when a tool first needs them (the config module and its checks cost start-up)."""
        if self._settings is None:
            from liminal import config, log

            self._settings = config.load({"home": self.home}, config_file=self.config_file)
            log.configure(self._settings.log_level)
        return self._settings

    def tools(self) -> list[Tool]:
        return [
            Tool("recall", "The original text behind a truncation marker in the conversation "
                 "('... call liminal's recall tool with key K'), exactly as it was; also what a key "
                 "in liminal's context block names (a lesson or a tickle from another conversation: "
                 "what was said there). Long texts come in parts: pass `start` to get the next.",
                 {"key": {"type": "string", "description": "the key from the marker"},
                  "start": {"type": "integer", "description": "character to start from (default 0)"}},
                 ("key",), self.recall),
            Tool("search_history", "Full-text search over this conversation's whole history, also what "
                 "is no longer in the context: what the user and you said and what tools returned, "
                 "with when and which turn. `all_threads` searches every conversation liminal kept; "
                 "`everything` adds liminal's own commands and the CLI's bookkeeping records. A long "
                 "answer comes as a dump: a paragraph about it and an id that `recall` reads in parts.",
                 {"query": {"type": "string"},
                  "limit": {"type": "integer", "description": f"default 8, at most {SEARCH_LIMIT}"},
                  "all_threads": {"type": "boolean"}, "everything": {"type": "boolean"}},
                 ("query",), self.search_history),
            Tool("slash", "Change your own context when this turn ends: `mark NAME` names this point; "
                 "`clear` empties the context, `clear NAME` goes back to mark NAME; `fork [NAME]` starts "
                 "a new session with this context (or what followed NAME); `undo` takes the last turn "
                 "out. The history stays in liminal's store.",
                 {"command": {"type": "string", "enum": list(SLASH)},
                  "args": {"type": "string", "description": "a mark name, for mark, clear and fork"}},
                 ("command",), self.slash),
            Tool("memo_save", "Keep a note that outlives this conversation, with tags to find it by.",
                 {"content": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
                 ("content",), self.memo_save),
            Tool("memo_find", "Notes kept with memo_save, in any conversation: those with every tag "
                 "given and containing the text given (both optional).",
                 {"tags": {"type": "array", "items": {"type": "string"}}, "text": {"type": "string"}},
                 (), self.memo_find),
            Tool("scratchpad", "This conversation's scratchpad: notes you and the user both keep (the "
                 "user with /scratchpad), placed at the head of your context whenever liminal "
                 "compresses or cuts it, so they outlive every swap. `read` it, `replace` it with "
                 "`text`, or `append` `text` on a line of its own.",
                 {"action": {"type": "string", "enum": list(SCRATCHPAD_ACTIONS)},
                  "text": {"type": "string", "description": "for replace (empty: clear it) and append"}},
                 ("action",), self.scratchpad),
        ]

    async def aclose(self) -> None:
        await self._stack.aclose()

    # ------------------------------------------------------------------ helpers

    def bound(self) -> str:
        if self.thread is None and self.nonce is not None:
            self.thread = link.bound_thread(self.home or self.settings.home, self.nonce)
        if self.thread is None:
            raise ToolError("liminal has not bound this server to a conversation yet; try again "
                            "after this turn")
        return self.thread

    async def store(self) -> Store:
        async with self._lock():
            return await self._open_store()

    async def _open_store(self) -> Store:
        if self._store is None:
            if not self.settings.store.index:
                raise ToolError("liminal's store is off (store.index = false): no history to search")
            from liminal.store.configured import open_store

            # memo_save writes: a store the index worker has not made yet is made here (the
            # model's first act in a new install was "no store").
            self._store = await self._stack.enter_async_context(open_store(self.settings, create=True))
        return self._store

    async def recaller(self) -> Recaller:
        async with self._lock():
            if self._recaller is None:
                from liminal.lookup.recaller import Recaller
                from liminal.store.base import StoreError
                from liminal.store.cache import open_cache

                try:
                    store: Store | None = await self._open_store()
                except (ToolError, StoreError):  # no history kept here: the CLI's files answer
                    store = None
                cache = await self._stack.enter_async_context(open_cache(self.settings))
                self._recaller = Recaller(store, cache)
            return self._recaller

    # ------------------------------------------------------------------ tools

    async def recall(self, args: dict[str, Any]) -> list[str]:
        from liminal.gradient.recall import RecallError
        from liminal.lookup import dumps

        try:
            data = await (await self.recaller()).recall(args["key"])
        except RecallError as exc:
            raise ToolError(str(exc)) from exc
        text = data.decode("utf-8", "surrogatepass")
        start = int(args.get("start", 0))
        if dumps.is_dump_id(args["key"]):  # a dump's pages: whole finds, as its paragraph said
            return dumps.paged(text, start, self.settings.memory.dump_chars, lines=True)
        return dumps.paged(text, start, RECALL_CHARS)

    async def search_history(self, args: dict[str, Any]) -> list[str]:
        from liminal.lookup import dumps

        query = dumps.Query(args["query"], bool(args.get("all_threads")), bool(args.get("everything")),
                            min(max(1, int(args.get("limit", 8))), SEARCH_LIMIT))
        try:
            thread: str | None = self.bound()
        except ToolError:
            if not query.all_threads:
                raise
            thread = None
        store = await self.store()
        # The model's own searches (this one is in the store already, as a tool call naming the
        # query) are liminal's tool calls: left out with the rest of liminal's own part.
        found = await dumps.search(store, thread or "", query)
        if not found:
            return [f"Nothing found for {args['query']!r}."]
        text = dumps.answer(found, all_threads=query.all_threads)
        page = self.settings.memory.dump_chars
        if len(text) <= page or thread is None:  # (a dump is kept by its thread)
            return [text[:RECALL_CHARS]]
        dump_id = await dumps.keep(store, (await self.recaller()).cache, thread, query, found, text)
        return [dumps.summary(dump_id, query, found, text, page)]

    async def scratchpad(self, args: dict[str, Any]) -> list[str]:
        from liminal.lookup import scratchpad

        action, text = args["action"], str(args.get("text") or "")
        if action not in SCRATCHPAD_ACTIONS:
            raise ToolError(f"no action {action!r}; these: {', '.join(SCRATCHPAD_ACTIONS)}")
        thread, store = self.bound(), await self.store()
        limit = self.settings.memory.scratchpad_chars
        try:
            if action == "replace":
                await scratchpad.replace(store, thread, text, limit=limit, by="model")
            elif action == "append":
                if not text.strip():
                    raise ToolError("append needs a text")
                await scratchpad.append(store, thread, text, limit=limit, by="model")
        except scratchpad.TooLong as exc:
            raise ToolError(f"{exc}: nothing changed; shorten it, or replace it with less") from exc
        now = await scratchpad.read(store, thread)
        said = {"read": "", "replace": "Scratchpad replaced. ", "append": "Added. "}[action]
        if now is None:
            return [f"{said}The scratchpad is empty (at most {limit} characters)."]
        return [f"{said}The scratchpad ({len(now.text)} of at most {limit} characters; the head of your "
                f"context from the next swap on):\n{now.text}"]

    async def slash(self, args: dict[str, Any]) -> list[str]:
        command, rest = args["command"], str(args.get("args", "")).strip()
        if command not in SLASH:
            raise ToolError(f"no slash command {command!r}; these: {', '.join(SLASH)}")
        if command == "mark" and not rest:
            raise ToolError("mark needs a name")
        if command == "undo" and rest:
            raise ToolError("undo takes no arguments")
        if rest and not link.safe(rest):
            raise ToolError(f"{rest!r} is not a mark name: letters, digits, '.', '_' or '-'")
        link.leave_slash(self.home or self.settings.home, self.bound(), command, rest)
        return [f"liminal will run /{command}{' ' + rest if rest else ''} when this turn ends."]

    async def memo_save(self, args: dict[str, Any]) -> list[str]:
        from liminal.lookup.memos import save_memo

        content = args["content"].strip()
        if not content:
            raise ToolError("an empty memo")
        tags = [str(t) for t in args.get("tags", [])]
        thread = None
        try:
            thread = self.bound()
        except ToolError:
            pass
        memo = await save_memo(await self.store(), content, tags, thread)
        return [f"Memo kept ({memo.id})."]

    async def memo_find(self, args: dict[str, Any]) -> list[str]:
        from liminal.lookup.memos import describe, find_memos

        found = await find_memos(await self.store(), [str(t) for t in args.get("tags", [])],
                                 str(args.get("text", "")))
        return ["\n".join(f"- {describe(m)}" for m in found) if found else "No memos found."]
