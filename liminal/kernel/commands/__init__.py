"""liminal's own slash commands, and the ACP methods liminal answers for the agent: answered in
the thread by liminal, never sent to the CLI or the model (``docs/commands.md``).

- ``center.py``: ``CommandCenter``, the component: it adds the table's request hooks to the
  router, takes what they keep onto one queue, and answers each with its handler;
- ``table.py``: the table: each command's row (name, handler, what the UI offers, whether it
  only reads, acts on the context, is for the model) and each local method's (``session/prompt``,
  ``session/list``, ``session/load`` and ``resume``, ``session/delete``, ``session/fork``);
- ``shared.py``, ``stores.py``: what every handler is given (``CommandContext``) and the store
  it reads; the handlers import these, never each other;
- one module per command family (``marks``, ``clearing``, ``contextview``, ``search``,
  ``memos``, ``scratchpad``, ``lessons``, ``naming``) and per local method (``opening``,
  ``listing``, ``forking``, ``deleting``).

Moving the model's context (``/clear``, ``/undo``, ``/optimise``) is the swap's step with other
file contents (``ThreadMover.move_thread``); ``/fork`` writes a session the agent lists and
leaves the thread where it is.
"""

from liminal.kernel.commands.center import CommandCenter
from liminal.kernel.commands.shared import CommandContext, CommandError
from liminal.kernel.commands.table import COMMANDS, parse, prompt_text

__all__ = ["COMMANDS", "CommandCenter", "CommandContext", "CommandError", "parse", "prompt_text"]
