"""The port: the one interface through which components act on the conversation.

A component (the swap manager, the command center, the recycle, the replay manager) never
holds the proxy, its router or its legs. It is handed a ``Port`` and does everything through
it. The port is the union of five narrow roles, and a component or a function names only the
roles it uses, so what each can do is read from its signature:

- ``ThreadView``: what the router knows (a thread's session, held, a prompt in flight, the
  agent idle or alive, why liminal stops);
- ``ThreadControl``: hold and release a thread, bind it to another session, capture a
  session's notifications while liminal opens it;
- ``ClientVoice``: answer a client request liminal kept (or send it on), notify the client,
  replay a moved thread's history, write a note for the store;
- ``AgentLink``: send a request of liminal's own to the agent and await its answer, notify it,
  read a side session's words;
- ``AgentLife``: the agent's process: prepare another, make it the agent, which one runs.

A function that needs several names a protocol that inherits them (``Port`` itself for what
needs all). Each act that produces frames writes them out before it returns (the port flushes
by itself), so no component has to remember a ``flush``, and none can leave a frame unwritten
by forgetting one.

``liminal.proxy`` implements the port over its router and its legs; tests implement it over a
bare ``Router`` and literal frames (``tests/support/fakeport.py``), with no process and no proxy.
The kernel imports this module, never ``liminal.proxy`` or ``liminal.transport``.

The agent process itself is behind the port too: the recycle and the agent restart prepare a
fresh process of the agent (``start_agent``), open the threads on it with the same request
path as every own request (``AgentProcess.request``), and make it the agent (``switch_agent``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from liminal.acp.events import FrameEvent
from liminal.acp.router import LocalRequest, ReplayRequest, RequestHook, ResultHook, UpdateHook
from liminal.errors import short


class OwnRequestError(Exception):
    """The agent answered one of liminal's own requests with an error (or is gone). Its text is
    what happened in words (``liminal.errors``): ``the agent refused session/resume: Internal
    error: no such session (error -32603)``, ``session/new: the agent is gone``."""

    def __init__(self, method: str, error: Any) -> None:
        super().__init__(_answered(method, error))
        self.method = method
        self.error = error


def _answered(method: str, error: Any) -> str:
    """An own request the agent answered with an error (a JSON-RPC error object), or that never
    got an answer (``error``: why)."""
    if isinstance(error, dict):
        message = short(str(error.get("message") or "an error"))
        code = error.get("code")
        data = error.get("data")
        if isinstance(data, dict) and isinstance(data.get("details"), str):
            message = f"{message}: {short(data['details'])}"
        elif isinstance(data, str) and data:
            message = f"{message}: {short(data)}"
        asked = f" {method}" if method else ""
        return f"the agent refused{asked}: {message}" + (f" (error {code})" if isinstance(code, int) else "")
    why = short(str(error))
    return f"{method}: {why}" if method else why


class AgentProcess(Protocol):
    """A process of the agent command that liminal prepares before it becomes the agent
    (``Port.start_agent``), or runs a side session in and stops (``liminal.kernel.summaries``):
    liminal's own requests and their answers, nothing else. What it writes besides the answers
    (a loaded session's replay, command lists) goes nowhere, a side session's words are kept
    (``take_side``); a request it makes of the client fails it (the client does not talk to it),
    one in a side session is refused (the router's rule 11)."""

    @property
    def failure(self) -> str | None:
        """Why it cannot become the agent, once something went wrong; else None."""

    @property
    def dropped(self) -> int:
        """Lines it wrote that were not answers (a replay, command lists)."""

    @property
    def pid(self) -> int | None: ...

    async def request(self, method: str, params: Any, *, timeout: float,
                      thread_id: str | None = None, private: bool = False) -> Any:
        """As ``Port.request``, to this process."""

    def take_side(self, session_id: str) -> list[bytes]:
        """As ``Port.take_side``, of this process."""


class ThreadView(Protocol):
    """What a component reads of the threads and of the agent's state: the router's knowledge,
    nothing that acts."""

    @property
    def agent_alive(self) -> bool: ...

    def backing_of(self, thread_id: str) -> str: ...

    def thread_of(self, backing_id: str) -> str: ...

    def is_held(self, thread_id: str) -> bool: ...

    def prompt_in_flight(self, thread_id: str) -> bool: ...

    def agent_request_open(self, thread_id: str) -> bool: ...

    def agent_idle(self) -> bool: ...

    def stop_cause(self) -> str | None:
        """Why liminal is stopping, in words ("the client closed its connection", "liminal was
        sent SIGTERM"), once it is (from just before the components' ``stopping``); else None."""


class ThreadControl(Protocol):
    """What a component does to the threads in the router: hold them, bind them to another
    session, capture a session's notifications while it is opened."""

    def hold(self, thread_id: str) -> None:
        """The thread's next client frames wait (``Router.hold``)."""

    def release(self, thread_id: str) -> int:
        """Let them through, written out at once; returns how many were held."""

    def bind(self, thread_id: str, backing_id: str) -> None: ...

    def adopt(self, backing_id: str, thread_id: str) -> None: ...

    def capture(self, backing_id: str) -> None: ...

    def uncapture(self, backing_id: str) -> None: ...


class ClientVoice(Protocol):
    """What a component says to the client, and notes for the store: the answer to a request it
    kept (or the request sent on to the agent), notifications, a moved thread's replay."""

    def answer_local(self, key: Any, result: Any = None, *,
                     error: tuple[int, str] | None = None) -> None: ...

    def forward_local(self, key: Any, method: str, params: dict[str, Any]) -> bool:
        """Send a kept request on to the agent as ``method`` (``Router.forward_local``)."""

    def notify_client(self, method: str, params: Any) -> None: ...

    def notify_in_next_turn(self, thread_id: str, method: str, params: Any) -> None: ...

    def note(self, method: str, data: dict[str, Any], *, thread_id: str, at: float | None = None) -> None:
        """A note for the store (the taps), never sent to either side; ``at``: its time, if
        not now."""

    def finish_replay(self, token: int, history: list[dict[str, Any]] | None) -> bool: ...


class AgentLink(Protocol):
    """What a component says to the agent of its own: requests it awaits, notifications, and
    the words of a side session."""

    async def request(self, method: str, params: Any, *, timeout: float,
                      thread_id: str | None = None, private: bool = False) -> Any:
        """Send a request of liminal's own to the agent and await its result
        (``OwnRequestError`` for an error answer or an agent that is gone). ``private``: a
        side session's (the router's rule 11): a session it creates is liminal's alone."""

    def notify_agent(self, method: str, params: Any, *, thread_id: str | None = None) -> None:
        """A notification of liminal's own to the agent (``params`` in backing ids)."""

    def take_side(self, session_id: str) -> list[bytes]:
        """What the agent said in a side session since the last take (its notifications)."""

    def end_side(self, session_id: str) -> None:
        """The side session is closed: the router forgets it."""


class AgentLife(Protocol):
    """The agent's process: another one prepared and made the agent, which one runs now, and
    its death."""

    async def start_agent(self) -> AgentProcess:
        """A new process of the agent command (argv, environment, cwd), not yet the agent."""

    def switch_agent(self, process: AgentProcess) -> None:
        """Make ``process`` the agent (only while ``agent_idle()``); the old one is stopped."""

    def discard_agent(self, process: AgentProcess) -> None:
        """Stop a process that will not become the agent."""

    def agent_restarted(self) -> None:
        """The agent died and a new process took its place (``Router.agent_restarted``)."""

    def agent_token(self) -> object:
        """Which process is the agent now (compare with ``agent_running``)."""

    def agent_running(self, token: object) -> bool:
        """The process ``agent_token`` named is still the agent, and has not exited."""

    def kill_agent(self) -> None:
        """Kill the agent's process group at once (fault injection only: ``liminal.faults``)."""


class Conversation(ThreadView, ThreadControl, ClientVoice, AgentLink, Protocol):
    """Everything but the agent's process: what opens, restores and answers for a thread
    (``liminal.kernel.restore``)."""


class Port(Conversation, AgentLife, Protocol):
    """All of it: what the proxy implements (``liminal.proxy.ProxyPort``) and hands each
    component, and what a component that moves threads needs (the mover holds, binds, asks the
    agent, tells the client, and kills the agent for fault injection)."""


class Frames(enum.Enum):
    """Which frames a component's ``offer`` is called for (on the forwarding path)."""

    NONE = "none"
    ALL = "all"
    # All but notifications: nearly every frame is one (a streamed chunk), and a component that
    # learns nothing from them costs forwarding nothing for them (``liminal.supervise``).
    NO_NOTIFICATIONS = "no notifications"


class Component:
    """What the proxy calls on each of its components: every hook does nothing unless the
    component overrides it. The proxy supervises each call (``liminal.supervise``): a component
    that fails never takes forwarding down.

    - ``parts()``: components this one is built on (the thread model the swap manager reads),
      run ahead of it, each once however many components name it.
    - ``offer(event)``: each frame, as ``frames`` says, synchronously and on the forwarding
      path (``liminal.acp.taps``: it must return at once).
    - ``prepare(port)``: before the client's first byte is read.
    - ``run(port)``: for the life of the proxy (restarted after a failure).
    - ``stopping()``: the client has gone; before the agent is stopped.
    - ``aclose()``: after the agent has gone.
    - ``request_hooks()``, ``update_hooks()``, ``result_hooks()``: the router's hooks
      (``RequestHook``, ``UpdateHook``, ``ResultHook``).
    - ``local_requested(request)``: a client request a request hook kept for liminal
      (``answers_local``: this component answers them).
    - ``replay_requested(request)``: a moved thread's load, for its history from the store
      (``answers_replays``; raising hands the load back to the agent's own replay).
    - ``restart_agent(port, exit_code)``: the agent died with the client connected; True once
      this component has started a new process of it.
    """

    frames: ClassVar[Frames] = Frames.NONE
    answers_local: ClassVar[bool] = False
    answers_replays: ClassVar[bool] = False

    def parts(self) -> Sequence[Component]:
        return ()

    def offer(self, event: FrameEvent) -> None:
        return None

    async def prepare(self, port: Port) -> None:
        return None

    async def run(self, port: Port) -> None:
        return None

    async def stopping(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def request_hooks(self) -> Sequence[tuple[tuple[str, ...], RequestHook]]:
        return ()

    def update_hooks(self) -> Sequence[tuple[tuple[str, ...], UpdateHook]]:
        return ()

    def result_hooks(self) -> Sequence[tuple[tuple[str, ...], ResultHook]]:
        return ()

    def local_requested(self, request: LocalRequest) -> None:
        raise NotImplementedError("this component answers no local requests")

    def replay_requested(self, request: ReplayRequest) -> None:
        raise NotImplementedError("this component answers no replays")

    async def restart_agent(self, port: Port, exit_code: int) -> bool:
        return False
