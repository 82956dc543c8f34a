"""RabbitMQ's frames made into messages, with a message's properties read in one pass.

py-amqp decodes a message's properties (its headers among them) with a
general reader that tries each AMQP type in turn for every value: 15 us for
the twenty headers of a Celery task message, on every delivery. Here the
types a task message uses (strings, void, booleans, 32-bit integers, doubles,
tables and arrays) are read directly; a message with any other type, or
anything this reader does not take as it is, is read by py-amqp's own
`decode_properties_basic`, so the result is py-amqp's in every case.

`frame_handler` is py-amqp's framing (method, content header, content body and
heartbeat frames, per channel), making `Message` so that these properties are
read the quick way. core/amqp_transport.py's connection uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from typing import Any

from amqp import spec
from amqp.basic_message import Message as AmqpMessage
from amqp.exceptions import UnexpectedFrame
from amqp.serialization import decode_properties_basic

Frame = tuple[int, int, bytes]

_METHOD, _HEADER, _BODY, _HEARTBEAT = 1, 2, 3, 8
# Methods followed by a content header (and body): the frames of a message.
CONTENT_METHODS = frozenset({spec.Basic.Deliver, spec.Basic.GetOk, spec.Basic.Return})

_method_sig = Struct(">HH").unpack_from
_flags = Struct(">H").unpack_from
_uint32 = Struct(">I").unpack_from
_int32 = Struct(">i").unpack_from
_uint64 = Struct(">Q").unpack_from
_double = Struct(">d").unpack_from

# The basic properties in the order of their flag bits, and how each is written.
_SHORT_STRING, _OCTET, _TABLE, _TIMESTAMP = range(4)
BASIC_PROPERTIES = (
    (0x8000, "content_type", _SHORT_STRING),
    (0x4000, "content_encoding", _SHORT_STRING),
    (0x2000, "application_headers", _TABLE),
    (0x1000, "delivery_mode", _OCTET),
    (0x0800, "priority", _OCTET),
    (0x0400, "correlation_id", _SHORT_STRING),
    (0x0200, "reply_to", _SHORT_STRING),
    (0x0100, "expiration", _SHORT_STRING),
    (0x0080, "message_id", _SHORT_STRING),
    (0x0040, "timestamp", _TIMESTAMP),
    (0x0020, "type", _SHORT_STRING),
    (0x0010, "user_id", _SHORT_STRING),
    (0x0008, "app_id", _SHORT_STRING),
    (0x0004, "cluster_id", _SHORT_STRING),
)


class _Unusual(Exception):
    """A value of a type this reader leaves to py-amqp."""


def decode_basic_properties(buf: bytes, offset: int) -> tuple[dict[str, Any], int]:
    """py-amqp's `decode_properties_basic`: the same properties and end offset, sooner."""
    try:
        return _properties(buf, offset)
    except Exception:  # another type, text that is not UTF-8, a frame cut short: py-amqp's say
        return decode_properties_basic(buf, offset)


# Text is decoded strictly: what strict UTF-8 takes, py-amqp's "surrogatepass"
# reads alike, and what it refuses goes to py-amqp.


def _properties(buf: bytes, offset: int) -> tuple[dict[str, Any], int]:
    (flags,) = _flags(buf, offset)
    offset += 2
    properties: dict[str, Any] = {}
    for bit, name, kind in BASIC_PROPERTIES:
        if not flags & bit:
            continue
        if kind == _SHORT_STRING:
            end = offset + 1 + buf[offset]
            properties[name] = buf[offset + 1 : end].decode()
            offset = end
        elif kind == _TABLE:
            properties[name], offset = _table(buf, offset)
        elif kind == _OCTET:
            properties[name] = buf[offset]
            offset += 1
        else:
            (properties[name],) = _uint64(buf, offset)
            offset += 8
    return properties, offset


def _table(buf: bytes, offset: int) -> tuple[dict[str, Any], int]:
    """A field table at `offset` (its size first), and the offset after its last value.

    The values most headers have are read here, the others by `_value`.
    """
    (size,) = _uint32(buf, offset)
    offset += 4
    limit = offset + size
    table: dict[str, Any] = {}
    while offset < limit:
        end = offset + 1 + buf[offset]
        key = buf[offset + 1 : end].decode()
        kind = buf[end]
        offset = end + 1
        if kind == 0x53:  # S: long string
            (size,) = _uint32(buf, offset)
            end = offset + 4 + size
            table[key] = buf[offset + 4 : end].decode()
            offset = end
        elif kind == 0x56:  # V: void
            table[key] = None
        elif kind == 0x74:  # t: boolean, one octet
            table[key] = bool(buf[offset])
            offset += 1
        elif kind == 0x49:  # I: signed 32-bit integer
            (table[key],) = _int32(buf, offset)
            offset += 4
        else:
            table[key], offset = _value(buf, end)
    return table, offset


def _value(buf: bytes, offset: int) -> tuple[Any, int]:
    """A field value at `offset` (its type letter first), and the offset after it."""
    kind = buf[offset]
    offset += 1
    if kind == 0x53:  # S: long string
        (size,) = _uint32(buf, offset)
        end = offset + 4 + size
        return buf[offset + 4 : end].decode(), end
    if kind == 0x56:  # V: void
        return None, offset
    if kind == 0x74:  # t: boolean, one octet
        return bool(buf[offset]), offset + 1
    if kind == 0x49:  # I: signed 32-bit integer
        return _int32(buf, offset)[0], offset + 4
    if kind == 0x64:  # d: double
        return _double(buf, offset)[0], offset + 8
    if kind == 0x46:  # F: table
        return _table(buf, offset)
    if kind == 0x41:  # A: array, its size first
        (size,) = _uint32(buf, offset)
        offset += 4
        limit = offset + size
        items = []
        while offset < limit:
            item, offset = _value(buf, offset)
            items.append(item)
        return items, offset
    raise _Unusual(kind)


class Message(AmqpMessage):
    """py-amqp's message, its basic properties read by `decode_basic_properties`."""

    def _load_properties(self, class_id: int, buf: bytes, offset: int) -> int:
        if class_id != spec.Basic.CLASS_ID:
            return super()._load_properties(class_id, buf, offset)
        self.properties, offset = decode_basic_properties(buf, offset)
        return offset


def frame_handler(
    connection: Any, callback: Callable[[int, Any, bytes, Any], Any]
) -> Callable[[Frame], bool]:
    """What a connection calls with each frame it reads: True once a method is complete.

    A method with content (a delivered message) is complete after its header
    frame and its body frames; a heartbeat frame may come between any two.
    `callback(channel, method, arguments, message)` takes each complete one.
    """
    expected: dict[int, int] = {}
    partial: dict[int, Message] = {}

    def on_frame(frame: Frame) -> bool:
        kind, channel, buf = frame
        connection.bytes_recv += 1
        wanted = expected.get(channel, _METHOD)
        if kind != wanted and kind != _HEARTBEAT:
            raise UnexpectedFrame(f"Received frame {kind} while expecting type: {wanted}")
        if kind == _METHOD:
            method = _method_sig(buf, 0)
            if method in CONTENT_METHODS:
                partial[channel] = Message(frame_method=method, frame_args=buf)
                expected[channel] = _HEADER
                return False
            callback(channel, method, buf, None)
            return True
        if kind == _HEARTBEAT:
            return False
        message = partial[channel]
        if kind == _HEADER:
            message.inbound_header(buf)
        else:
            message.inbound_body(buf)
        if not message.ready:
            expected[channel] = _BODY
            return False
        expected[channel] = _METHOD
        del partial[channel]
        callback(channel, message.frame_method, message.frame_args, message)
        return True

    return on_frame
