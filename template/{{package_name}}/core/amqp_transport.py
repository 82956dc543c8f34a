"""The transport the worker and producers run on RabbitMQ: kombu's, reading in chunks.

py-amqp reads a frame in three pieces (its header, its payload, its end byte),
each with its own `recv`, and kombu's event loop drains a connection one frame
at a time, switching the socket to non-blocking and back around each: a task
message (three frames) costs nine `recv` and six `ioctl` system calls. Here
the socket is read a chunk at a time into py-amqp's own read buffer, and a
frame already whole in that buffer is taken in one piece, without touching the
socket or its time-out. The frames, their order and every error are py-amqp's;
TLS connections keep py-amqp's transport unchanged (core/config.py picks this
one for `amqp://` only).
"""

from __future__ import annotations

import errno
from contextlib import AbstractContextManager, nullcontext
from struct import unpack, unpack_from
from typing import Any

from amqp.transport import TCPTransport
from kombu.transport import pyamqp

from .amqp_frames import Frame, frame_handler

# How much one `recv` may take beyond the piece asked for. A task message is
# a few hundred bytes; each frame taken from the buffer copies what is left
# behind it, so the chunk stays small.
READ_CHUNK = 4096
# type (1 byte), channel (2), payload size (4), then the payload and an end byte.
FRAME_HEADER = 7
FRAME_END = 0xCE


class ChunkedTCPTransport(TCPTransport):
    """py-amqp's TCP transport, reading what the socket holds, up to READ_CHUNK at a time."""

    def _read(self, n: int, initial: bool = False, _errnos=(errno.EAGAIN, errno.EINTR)) -> bytes:
        rbuf = self._read_buffer
        if len(rbuf) < n:
            # As py-amqp's own _read, except that each recv asks for a chunk:
            # the socket returns what it has, never waiting for the whole chunk.
            recv = self._quick_recv
            try:
                while len(rbuf) < n:
                    try:
                        s = recv(max(n - len(rbuf), READ_CHUNK))
                    except OSError as exc:
                        if exc.errno in _errnos:
                            if initial and self.raise_on_initial_eintr:
                                raise TimeoutError() from None
                            continue
                        raise
                    if not s:
                        raise OSError("Server unexpectedly closed connection")
                    rbuf += s
            except BaseException:  # as py-amqp: keep what was read, whatever stopped it
                self._read_buffer = rbuf
                raise
        result, self._read_buffer = rbuf[:n], rbuf[n:]
        return result

    def buffered_frame(self) -> Frame | None:
        """The next frame when it is whole in the read buffer (taken out of it), else None.

        A frame whose end byte is wrong is left for py-amqp's `read_frame`, which
        raises UnexpectedFrame.
        """
        end = self._frame_end()
        rbuf = self._read_buffer
        if end is None or rbuf[end] != FRAME_END:
            return None
        kind, channel = unpack_from(">BH", rbuf)
        self._read_buffer = rbuf[end + 1 :]
        return kind, channel, rbuf[FRAME_HEADER:end]

    def read_frame(self, unpack: Any = unpack) -> Frame:
        return self.buffered_frame() or super().read_frame(unpack)

    def having_timeout(self, timeout: float | None) -> AbstractContextManager[Any]:
        # A whole frame in the buffer is read without the socket: no timeout to set.
        if timeout is not None and self._frame_end() is not None:
            return nullcontext(self.sock)
        return super().having_timeout(timeout)

    def _frame_end(self) -> int | None:
        """Where the next frame's end byte is, when the whole frame is in the read buffer."""
        rbuf = self._read_buffer
        if len(rbuf) <= FRAME_HEADER:
            return None
        (size,) = unpack_from(">I", rbuf, 3)
        end = FRAME_HEADER + size
        return end if len(rbuf) > end else None


class Connection(pyamqp.Connection):
    """kombu's py-amqp connection on `ChunkedTCPTransport` (TLS: py-amqp's own).

    Its frames become messages by core/amqp_frames.py's `frame_handler`, which
    reads a message's properties in one pass.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("frame_handler", frame_handler)
        super().__init__(*args, **kwargs)

    def blocking_read(self, timeout: float | None = None) -> Any:
        # py-amqp's, which sets the socket's time-out around every frame read;
        # a frame already whole in the buffer needs neither.
        transport = self.transport
        if type(transport) is ChunkedTCPTransport and (frame := transport.buffered_frame()):
            return self.on_inbound_frame(frame)
        return super().blocking_read(timeout)

    def Transport(  # noqa: N802 - py-amqp's name
        self,
        host: str,
        connect_timeout: float | None,
        ssl: Any = False,
        read_timeout: float | None = None,
        write_timeout: float | None = None,
        socket_settings: Any = None,
        **kwargs: Any,
    ) -> Any:
        options = {
            "read_timeout": read_timeout,
            "write_timeout": write_timeout,
            "socket_settings": socket_settings,
            **kwargs,
        }
        if ssl:
            return super().Transport(host, connect_timeout, ssl, **options)
        return ChunkedTCPTransport(host, connect_timeout=connect_timeout, ssl=ssl, **options)


class Transport(pyamqp.Transport):
    """kombu's py-amqp transport with `Connection`."""

    Connection = Connection
