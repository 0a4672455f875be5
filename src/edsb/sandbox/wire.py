"""What crosses the process boundary between the parent and a worker: length-prefixed frames, and the plan the code
set as plain values (JSON, never pickle, on the way back).

Requests go down pickled (the parent's own data: the reply text, the scene, the limits); answers come back as JSON
objects of bounded size, so nothing a run's code creates is ever unpickled in the parent. What the code stored in a
character's plan is reduced to `Plain` values in the worker; anything else travels as an `Opaque` type name and repr.
Every string a worker sends is valid Unicode (`replace_surrogates`), and the answer says whether one had to be repaired.
"""

from __future__ import annotations

import json
import math
import os
import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from edsb.results import ErrorKind
from edsb.sandbox.errors import CodeError, SandboxError, exception_text

# The one repair of lone surrogates. Model code can put them in exception messages, printed text and the values it
# sets; the worker sends none, and flags its answer `"repaired": true` when it replaced any (`RawPlan.repaired`,
# `CodeError.repaired` in the parent), so that the result can say so.
from edsb.text import clean_text as replace_surrogates

HEADER = struct.Struct(">I")  # the byte length of the frame that follows


class WorkerDied(Exception):
    """The worker's end of the pipe closed, or it sent something that is not an answer."""


class Deadline(Exception):
    """No (complete) answer before the deadline."""


# --- plain values -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Opaque:
    """A value set by model code that has no plain-data form (an Area inside a list, a handle, a dict, ...).

    Kept as its type name and repr so that converting it fails, or is judged, as the original object would be.
    """

    type_name: str
    text: str
    hashable: bool


Plain: TypeAlias = bool | int | float | str | list["Plain"] | tuple["Plain", ...] | Opaque | None


@dataclass(frozen=True)
class RawCharacterPlan:
    """One character handle after the code ran, before conversion (the reference's parsed-event entry)."""

    character: Plain  # the value passed to `get_character` (a name, normally)
    position: Plain  # an Area's condition list, or the list / tuple given to `set_position`; [] if never set
    target_action: Plain  # "" if never set
    orientation: tuple[str, ...] | None  # ("look at X",) once `set_orientation` was called


@dataclass(frozen=True)
class RawPlan:
    characters: tuple[RawCharacterPlan, ...]  # in order of each character's first setter call
    output: str = ""  # what the code printed, capped
    repaired: bool = False  # the worker replaced lone surrogates in a value or in the printed text


# Containers nest at most this deep in what `to_plain` makes: deeper ones become `Opaque`. An answer deeper than
# that was forged on the channel, and it is refused before it can reach a record (which JSON readers bound).
PLAIN_DEPTH = 4


def to_plain(value: Any) -> Plain:
    """What the code stored, as plain data the parent can rebuild (containers to a small depth). A numpy scalar
    counts as the Python value it stands for (`np.float64(1.5)` is a float, as the reference's code would use it).

    Converting runs code of the model's values (`hash`, `repr`, a `Counter`'s `most_common`), and any exception met
    there is the model's: `CodeError` of kind `code_output` (a `MemoryError` stays itself: the run's memory), never
    a fault of edsb. What comes out holds nothing but plain Python values, so encoding it cannot fail."""
    try:
        return _plain(value, 0)
    except MemoryError:
        raise
    except BaseException as exc:  # KeyboardInterrupt or SystemExit too: raised by the value, not by a signal
        message = f"the plan holds a value that cannot be converted to plain data: {exception_text(exc)}"
        raise CodeError(ErrorKind.CODE_OUTPUT, message) from None


def _plain(value: Any, depth: int) -> Plain:
    kind = type(value)
    if value is None or kind in (bool, float, str):
        return value
    if isinstance(value, np.generic) and isinstance(value, np.bool_ | np.integer | np.floating | np.str_):
        item = value.item()  # `np.longdouble` stays itself: it becomes the float it rounds to
        return _plain(float(item) if isinstance(item, np.floating) else item, depth)
    if kind is int:
        return value if -(1 << 63) <= value < (1 << 63) else Opaque("int", "<a very large int>", True)
    if kind in (list, tuple) and depth < PLAIN_DEPTH:
        items = [_plain(v, depth + 1) for v in value]
        return items if kind is list else tuple(items)
    try:
        hash(value)
        hashable = True
    except TypeError:
        hashable = False
    return Opaque(_exact_text(kind.__name__, 200), _exact_text(repr(value), 200), hashable)


def _exact_text(text: str, limit: int) -> str:
    """At most `limit` characters of `text` as a plain `str` (a subclass's slicing is not called)."""
    return str.__getitem__(text, slice(None, limit))


def encode_plain(value: Plain) -> Any:
    if isinstance(value, Opaque):
        return {"opaque": [value.type_name, value.text, value.hashable]}
    if isinstance(value, tuple):
        return {"tuple": [encode_plain(v) for v in value]}
    if isinstance(value, list):
        return [encode_plain(v) for v in value]
    return value


def decode_plain(value: Any, depth: int = 0) -> Plain:
    """The plain value `encode_plain` made; SandboxError for anything `to_plain` cannot have made."""
    if isinstance(value, dict):
        if "opaque" in value:
            type_name, text, hashable = value["opaque"]
            return Opaque(str(type_name), str(text), bool(hashable))
        return tuple(_decode_items(value["tuple"], depth))
    if isinstance(value, list):
        return _decode_items(value, depth)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise SandboxError(f"malformed value from the sandbox worker: {type(value).__name__}")


def _decode_items(items: list[Any], depth: int) -> list[Plain]:
    if depth >= PLAIN_DEPTH:
        raise SandboxError(f"malformed value from the sandbox worker: containers nested deeper than {PLAIN_DEPTH}")
    return [decode_plain(item, depth + 1) for item in items]


def decode_raw_plan(characters: list[dict[str, Any]], output: str, repaired: bool = False) -> RawPlan:
    return RawPlan(
        tuple(
            RawCharacterPlan(
                character=decode_plain(c["character"]),
                position=decode_plain(c["position"]),
                target_action=decode_plain(c["target_action"]),
                orientation=None if c["orientation"] is None else tuple(str(o) for o in c["orientation"]),
            )
            for c in characters
        ),
        str(output),
        bool(repaired),
    )


def scene_key(spec: tuple[Any, ...] | list[Any]) -> tuple[str, ...]:
    """The identity of a request's scene: ("held", digest of its pickle) for a benchmark scene the template holds,
    ("inline", digest) for one sent with the request."""
    return (str(spec[0]), str(spec[1]))


# --- valid Unicode --------------------------------------------------------------------------------------------------


def clean_plain(value: Plain) -> tuple[Plain, bool]:
    """A plain value with every string passed through `replace_surrogates`, and whether any changed."""
    if isinstance(value, str):
        cleaned = replace_surrogates(value)
        return cleaned, cleaned is not value
    if isinstance(value, Opaque):
        type_name, text = replace_surrogates(value.type_name), replace_surrogates(value.text)
        changed = type_name is not value.type_name or text is not value.text
        return (Opaque(type_name, text, value.hashable) if changed else value), changed
    if isinstance(value, list | tuple):
        items = [clean_plain(item) for item in value]
        if not any(changed for _, changed in items):
            return value, False
        kept = [item for item, _ in items]
        return (kept if isinstance(value, list) else tuple(kept)), True
    return value, False


# --- frames -----------------------------------------------------------------------------------------------------------


def frame(message: dict[str, Any] | str) -> bytes:
    """A JSON answer as the worker writes it: length, then UTF-8 JSON (`message` may be JSON text already)."""
    text = message if isinstance(message, str) else json.dumps(message, allow_nan=True)
    payload = text.encode("utf-8")
    return HEADER.pack(len(payload)) + payload


class FrameReader:
    """JSON objects from a worker's (or the template's) socket. Whatever has arrived is read in one system call and
    the rest kept for the next answer, so an answer usually costs one `poll` and one `recv`.

    Every read is bounded by its deadline, whatever the other end sends: a `recv` never waits (`MSG_DONTWAIT`), so
    a readiness that no data follows (an out-of-band byte, which `poll` reports while a plain read skips it and
    blocks) costs a retry, not the parent's clock. Such a byte is taken off the socket and dropped."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.poller = select.poll()  # not select(): the harness may hold more than FD_SETSIZE descriptors
        self.poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)

    def read(self, deadline: float, max_result_bytes: int) -> dict[str, Any]:
        """The next answer before the monotonic `deadline` (Deadline); WorkerDied at end of output, or if the
        answer is oversized or not a JSON object."""
        buffer = self.buffer
        size: int | None = None
        while True:
            if size is None and len(buffer) >= HEADER.size:
                (size,) = HEADER.unpack_from(buffer)
                if size > max_result_bytes + (1 << 16):
                    raise WorkerDied(f"it sent an oversized answer ({size} bytes)")
            if size is not None and len(buffer) >= HEADER.size + size:
                break
            wait = deadline - time.monotonic()
            if wait <= 0 or not self.poller.poll(math.ceil(wait * 1000)):
                raise Deadline()
            want = 1 << 16 if size is None else max(1 << 16, min(HEADER.size + size - len(buffer), 1 << 20))
            chunk = self._receive(want, wait)
            if chunk == b"":
                raise WorkerDied("end of output")
            buffer += chunk or b""
        payload = bytes(buffer[HEADER.size : HEADER.size + size])
        del buffer[: HEADER.size + size]
        try:
            message = json.loads(payload.decode("utf-8"))
        except (ValueError, RecursionError):
            raise WorkerDied("it sent an answer that is not JSON") from None
        if not isinstance(message, dict):
            raise WorkerDied("it sent an answer that is not a JSON object")
        return message

    def _receive(self, size: int, wait: float) -> bytes | None:
        """What has arrived (b"" at end of output), or None when nothing has: an out-of-band byte is dropped, and
        a readiness with nothing behind it costs a short pause, so that it cannot make the loop spin."""
        try:
            return self.sock.recv(size, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            pass
        except ConnectionResetError:
            return b""
        try:
            self.sock.recv(1, socket.MSG_OOB | socket.MSG_DONTWAIT)
        except OSError:
            time.sleep(min(_IDLE_PAUSE, max(wait, 0.0)))
        return None


_IDLE_PAUSE = 0.01  # seconds: a readiness without data is polled again after this


def read_blocking(fd: int, size: int) -> bytes | None:
    """`size` bytes from a blocking descriptor (a worker's socket), None at end of input."""
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data
