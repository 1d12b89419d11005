"""The two legs of the proxy, as thin asyncio shells: the client's stdio and the agent process.

Both are callback-driven (asyncio protocols) rather than read loops: a chunk from one side is
routed and written to the other inside one callback, with no task switch per chunk, which is
what keeps liminal near a bare relay's throughput. Flow control is the classic proxy pairing:
when one side's writer reports its buffer full (``pause_writing``), the other side's reader is
paused until it drains.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import stat
import threading
from collections.abc import Callable, Sequence
from typing import IO, Protocol

from liminal import private
from liminal.transport.agentlog import AgentLog
from liminal.transport.reaper import reaper

# asyncio reads a pipe into a fresh buffer of its transport's ``max_size`` (256 KiB) and shrinks
# it to what came: past malloc's mmap threshold that is an mmap, page faults and a munmap for
# every read, about 15 us of CPU for one 300-byte line (a streamed chunk, paced, is a read of its
# own). 64 KiB is what a pipe holds unless its owner enlarged it, so a read rarely comes larger;
# below the threshold the buffer comes from the heap.
PIPE_READ_BYTES = 64 * 1024

OnData = Callable[[bytes], None]
OnEof = Callable[[], None]
OnFlow = Callable[[bool], None]  # True: the writer is full, pause the source feeding it


class _ReadProtocol(asyncio.Protocol):
    """A pipe read in the loop's own callback: liminal's stdin, the agent's stdout. Where its
    data and its end go can be changed (``AgentLeg.connect``)."""

    def __init__(self, on_data: OnData, on_eof: OnEof) -> None:
        self.on_data = on_data
        self.on_eof = on_eof
        self._done = False

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def eof_received(self) -> bool:
        self._finish()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self.on_eof()


class _WriteProtocol(asyncio.Protocol):
    def __init__(self, on_flow: OnFlow, on_lost: OnEof) -> None:
        self._on_flow = on_flow
        self._on_lost = on_lost

    def pause_writing(self) -> None:
        self._on_flow(True)

    def resume_writing(self) -> None:
        self._on_flow(False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()


class ClientSide(Protocol):
    """What the proxy needs of the client's end: stdio (``ClientLeg``) or a WebSocket
    (``liminal.serve.leg.WebSocketClientLeg``)."""

    closed: bool

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None: ...

    def write(self, data: bytes) -> None: ...

    def pause_reading(self, pause: bool) -> None: ...

    def close(self) -> None: ...


def pollable(fd: int) -> bool:
    """Whether the event loop can watch ``fd``: a pipe, a socket, a terminal. A regular file
    (``< frames.ndjson``) or a character device such as ``/dev/null`` cannot be: epoll refuses
    them (EPERM), and asyncio's pipe transports say so only from a callback, after they were
    made, as a traceback and an input that never ends. Asked of the same kind of selector the
    loop uses, so the answer is the loop's own."""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
    except (OSError, ValueError):
        return False
    mode = os.fstat(fd).st_mode  # what asyncio's pipe transports take (kqueue takes files too)
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


class ClientLeg:
    """liminal's own stdin (frames from the client) and stdout (frames to the client).

    Either may be something the loop cannot watch (``pollable``): such a stdin is read by a
    thread, such a stdout written with blocking writes (a file or a device never stalls for
    long). A read that fails (a folder, an I/O error) is the end of the input.
    """

    def __init__(self, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
        self._stdin_fd = stdin_fd
        self._stdout_fd = stdout_fd
        self._reader: asyncio.ReadTransport | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._thread_reader: threading.Thread | None = None
        self._thread_may_read = threading.Event()  # cleared: the thread reader waits (flow control)
        self._thread_may_read.set()
        self._thread_stop = False
        self.closed = False  # stdout is gone: nothing more can reach the client

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        loop = asyncio.get_running_loop()
        if pollable(self._stdin_fd):
            stdin: IO[bytes] = os.fdopen(self._stdin_fd, "rb", buffering=0, closefd=False)
            self._reader, _ = await loop.connect_read_pipe(lambda: _ReadProtocol(on_data, on_eof), stdin)
            _read_at_most(self._reader, PIPE_READ_BYTES)
        else:
            self._thread_reader = threading.Thread(
                target=self._read_blocking, args=(loop, on_data, on_eof), daemon=True,
                name="liminal-stdin",
            )
            self._thread_reader.start()
        if pollable(self._stdout_fd):
            stdout: IO[bytes] = os.fdopen(self._stdout_fd, "wb", buffering=0, closefd=False)
            self._writer, _ = await loop.connect_write_pipe(
                lambda: _WriteProtocol(on_flow, self._lost), stdout
            )
        # else: blocking writes (``write``)

    def _read_blocking(self, loop: asyncio.AbstractEventLoop, on_data: OnData, on_eof: OnEof) -> None:
        data = b""
        try:
            while not self._thread_stop:
                self._thread_may_read.wait()
                try:
                    data = os.read(self._stdin_fd, 1 << 16)
                except OSError:
                    data = b""  # unreadable (a folder, EIO): the input ends here
                if not data or self._thread_stop:
                    break
                loop.call_soon_threadsafe(on_data, data)
            loop.call_soon_threadsafe(on_eof)
        except RuntimeError:
            pass  # the loop has closed: the proxy is over and wants nothing more

    def interactive(self) -> bool:
        """Whether a person's terminal is the input (no client program is there)."""
        try:
            return os.isatty(self._stdin_fd)
        except OSError:
            return False

    def _lost(self) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if self._writer is not None:
            if self._writer.is_closing():
                self.closed = True
                return
            self._writer.write(data)
            return
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._stdout_fd, view)
                view = view[written:]
        except OSError:
            self.closed = True

    def pause_reading(self, pause: bool) -> None:
        if self._reader is not None:
            (self._reader.pause_reading if pause else self._reader.resume_reading)()
        elif self._thread_reader is not None:
            (self._thread_may_read.clear if pause else self._thread_may_read.set)()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self._thread_stop = True
        self._thread_may_read.set()
        if self._writer is not None and not self._writer.is_closing():
            self._writer.close()


class _AgentProtocol(asyncio.SubprocessProtocol):
    def __init__(self, on_flow: OnFlow, on_exit: Callable[[int], None],
                 stderr: AgentLog, stderr_ended: asyncio.Event) -> None:
        self._on_flow = on_flow
        self._on_exit = on_exit
        self._stderr = stderr
        self._stderr_ended = stderr_ended
        self.transport: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport
        self._stderr.agent = transport.get_pid()

    def redirect(self, on_flow: OnFlow) -> None:
        self._on_flow = on_flow

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        if fd == 2:
            self._stderr.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 2:
            self._stderr.close()
            self._stderr_ended.set()

    def pause_writing(self) -> None:
        self._on_flow(True)

    def resume_writing(self) -> None:
        self._on_flow(False)

    def process_exited(self) -> None:
        assert self.transport is not None
        code = self.transport.get_returncode()
        self._on_exit(code if code is not None else -1)


class AgentSide(Protocol):
    """What the proxy needs of its agent's end: a process of the agent command (``AgentLeg``),
    or the successor in a conductor's chain (``liminal.transport.chain.SuccessorLeg``)."""

    argv: list[str]
    env: dict[str, str] | None
    cwd: str | None
    pid: int | None
    exited: asyncio.Event
    stderr: AgentLog
    stderr_ended: asyncio.Event

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None: ...

    def connect(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None: ...

    def write(self, data: bytes) -> None: ...

    def pause_reading(self, pause: bool) -> None: ...

    def close_stdin(self) -> None: ...

    def close(self) -> None: ...

    def signal_group(self, sig: int) -> bool: ...

    async def stop(self, grace: float, *, wait_first: float = 0.0) -> int: ...

    async def wait(self) -> int: ...


class AgentLeg:
    """The agent subprocess, in a process group of its own so it can be signalled whole.

    Its stderr is a pipe liminal reads (``liminal.transport.agentlog``): each line of it is a
    record of liminal's log, and its last lines say why an agent ended.
    """

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        if not argv:
            raise ValueError("no agent command")
        self.argv = list(argv)
        self.env = env
        self.cwd = cwd
        self.pid: int | None = None
        self._transport: asyncio.SubprocessTransport | None = None
        self._protocol: _AgentProtocol | None = None
        self._stdout: asyncio.ReadTransport | None = None
        self._output: _ReadProtocol | None = None
        # An Event, not a Future: a waiter cancelled mid-wait must not cancel the exit itself.
        self.exited = asyncio.Event()
        self.returncode: int | None = None
        self.stderr = AgentLog()
        self.stderr_ended = asyncio.Event()  # its stderr pipe has closed: every line of it read

    def _set_exit(self, code: int) -> None:
        self.returncode = code
        self.exited.set()

    async def wait(self) -> int:
        await self.exited.wait()
        assert self.returncode is not None
        return self.returncode

    async def open(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        loop = asyncio.get_running_loop()
        # The agent's stdout is a pipe of liminal's own, read like its stdin: through the
        # subprocess transport each read reached the router by ``call_soon``, one more turn of
        # the event loop for every read, which is every frame of a paced stream.
        out_read, out_write = os.pipe()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _AgentProtocol(on_flow, self._set_exit, self.stderr, self.stderr_ended),
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=out_write,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env=self.env,
                cwd=self.cwd,
                umask=private.agent_umask(),  # the user's, not liminal's private one
            )
        except BaseException:
            os.close(out_read)
            raise
        finally:
            os.close(out_write)  # the agent's now: its end of file is the agent's closing it
        self._transport = transport
        self._protocol = protocol
        self.pid = transport.get_pid()
        try:
            self._stdout, self._output = await loop.connect_read_pipe(
                lambda: _ReadProtocol(on_data, on_eof), os.fdopen(out_read, "rb", buffering=0))
        except BaseException:
            transport.close()
            raise
        for pipe in (self._stdout, transport.get_pipe_transport(2)):
            _read_at_most(pipe, PIPE_READ_BYTES)
        reaper.watch(self.pid)  # stopped even if liminal is killed (liminal.transport.reaper)

    def connect(self, on_data: OnData, on_eof: OnEof, on_flow: OnFlow) -> None:
        """Send the process's output, the end of it and its flow signals elsewhere from now on.

        A process liminal started and prepared on its own becomes the proxy's agent this way, and
        the one it replaces stops reaching the router (``liminal.kernel.recycle``).
        """
        if self._protocol is not None:
            self._protocol.redirect(on_flow)
        if self._output is not None:
            self._output.on_data, self._output.on_eof = on_data, on_eof

    def _stdin(self) -> asyncio.WriteTransport | None:
        if self._transport is None:
            return None
        pipe = self._transport.get_pipe_transport(0)
        return pipe if isinstance(pipe, asyncio.WriteTransport) and not pipe.is_closing() else None

    def write(self, data: bytes) -> None:
        pipe = self._stdin()
        if pipe is not None:
            pipe.write(data)

    def close(self) -> None:
        """Release the process's transport once it is not needed (it exited, or was stopped):
        left to the garbage collector, it would close itself after its event loop is gone."""
        if self._transport is not None:
            self._transport.close()
        if self._stdout is not None:
            self._stdout.close()

    def close_stdin(self) -> None:
        pipe = self._stdin()
        if pipe is not None:
            pipe.close()

    def pause_reading(self, pause: bool) -> None:
        pipe = self._stdout
        if pipe is not None and not pipe.is_closing():
            (pipe.pause_reading if pause else pipe.resume_reading)()

    def signal_group(self, sig: int) -> bool:
        """Signal the agent's whole process group; False when nothing was left to signal."""
        if self.pid is None:
            return False
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    async def stop(self, grace: float, *, wait_first: float = 0.0) -> int:
        """Let the agent exit, then SIGTERM its group, then SIGKILL it after ``grace`` seconds."""
        for sig, wait in ((None, wait_first), (signal.SIGTERM, grace), (signal.SIGKILL, grace)):
            if sig is not None:
                self.signal_group(sig)
            if self.exited.is_set():
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.exited.wait(), wait)
        code = await self.wait()
        # Whatever the adapter spawned and left behind (the CLI it drives) goes with it.
        self.signal_group(signal.SIGTERM)
        self.close()
        if self.pid is not None and not self.signal_group(0):
            reaper.forget(self.pid)  # nothing left of the group: nothing for the reaper to do
        return code


def _read_at_most(transport: object, size: int) -> None:
    """Make a pipe's reads at most ``size`` bytes (``PIPE_READ_BYTES`` says why)."""
    if transport is not None and isinstance(getattr(transport, "max_size", None), int):
        transport.max_size = size  # type: ignore[attr-defined]
