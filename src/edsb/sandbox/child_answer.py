"""What a child sends back, built the same way for both sandboxes: the plan the code set as JSON text of bounded
size (`pack`), the model's error (`error`), or, under `restricted` only, a fault of edsb's (`fault`). Every string is
valid Unicode, and an answer says when one had to be repaired."""

from __future__ import annotations

import json
import mmap
from typing import Any

from edsb.results import ErrorKind
from edsb.sandbox import kernel
from edsb.sandbox.code_api import PlanEntry
from edsb.sandbox.wire import clean_plain, encode_plain, replace_surrogates, to_plain


def pack(entries: list[PlanEntry], printed: str, request: dict[str, Any]) -> dict[str, Any] | str:
    """What the code set as the answer's JSON text (the plan encoded once), or the model's `code_output` error when
    it is too large."""
    repaired = False

    def plain(value: Any) -> Any:
        nonlocal repaired
        cleaned, changed = clean_plain(to_plain(value))
        repaired = repaired or changed
        return encode_plain(cleaned)

    characters = [
        {
            "character": plain(entry.character),
            "position": plain(entry.position),
            "target_action": plain(entry.target_action),
            "orientation": None if entry.orientation is None else [plain(str(o)) for o in entry.orientation],
        }
        for entry in entries
    ]
    output = replace_surrogates(printed)
    repaired = repaired or output is not printed
    plan = json.dumps(characters, allow_nan=True)
    if len(plan) > int(request["max_plan_bytes"]):
        return error(ErrorKind.CODE_OUTPUT, f"the plan is too large ({len(plan)} bytes)")
    flag = ', "repaired": true' if repaired else ""
    response = f'{{"status": "ok", "plan": {plan}, "output": {json.dumps(output)}{flag}}}'
    if len(response) > int(request["max_result_bytes"]):
        return error(ErrorKind.CODE_OUTPUT, f"the plan and printed text are too large ({len(response)} bytes)")
    return response


MAX_MESSAGE_CHARS = 2000


def bounded(message: str) -> tuple[str, bool]:
    """A message as the child sends it: at most `MAX_MESSAGE_CHARS` characters, valid Unicode (and whether it
    had to be repaired)."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "…"
    cleaned = replace_surrogates(message)
    return cleaned, cleaned is not message


_NO_THREAD = "can't start new thread"
# Why each thread this run could not start was refused, as `watch_thread_starts` found at the time: "memory" (no
# room for its stack within RLIMIT_AS) or "tasks" (the kernel's cap, RLIMIT_NPROC, with the run's threads at it).
_thread_refusals: list[str] = []


def watch_thread_starts() -> None:
    """In a run's child, before model code: note why a thread cannot start when it cannot. glibc answers EAGAIN both
    when the kernel refuses the task and when the stack cannot be mapped, and Python says only "can't start new
    thread", so the cause is found at the moment of failure (later, the threads may be gone). Every way to start one
    is watched: `threading`'s and `_thread`'s own, which model code may call directly (`start_joinable_thread`
    from Python 3.13). The exception itself is unchanged: model code that catches it behaves as under the reference."""
    import _thread
    import threading

    # One entry per thread started and still running (append and pop are atomic under the GIL): a thread counts from
    # its start, before it first runs, since a flood through `_thread` waits for none of them to run.
    running: list[None] = []

    def counted(function: Any) -> Any:
        if not callable(function):
            return function  # the start refuses it, as it would unwatched

        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            finally:
                running.pop()

        return run

    def watched(start: Any) -> Any:
        def start_thread(function: Any, *args: Any, **kwargs: Any) -> Any:
            running.append(None)
            try:
                return start(counted(function), *args, **kwargs)
            except BaseException as exc:
                running.pop()
                if isinstance(exc, RuntimeError):
                    _thread_refusals.append(_why_no_thread(1 + len(running), threading.stack_size()))
                raise

        return start_thread

    for module, name, original in _THREAD_STARTS:
        if hasattr(_thread, original):
            setattr(threading if module == "threading" else _thread, name, watched(getattr(_thread, original)))


# (module, attribute, the `_thread` function it holds): every name a thread is started through.
_THREAD_STARTS = (
    ("threading", "_start_new_thread", "start_new_thread"),
    ("threading", "_start_joinable_thread", "start_joinable_thread"),
    ("_thread", "start_new_thread", "start_new_thread"),
    ("_thread", "start_new", "start_new"),
    ("_thread", "start_joinable_thread", "start_joinable_thread"),
)


def _why_no_thread(threads: int, stack_bytes: int) -> str:
    """ "memory" when a stack of the thread's size cannot be mapped now; "tasks" when the run's threads are at the
    cap; "" when neither explains it."""
    try:
        mmap.mmap(-1, (stack_bytes or 8 << 20) + mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS).close()
    except (OSError, MemoryError):
        return "memory"
    return "tasks" if threads >= kernel.TASK_LIMIT - 3 else ""


def error(kind: str, message: str) -> dict[str, Any]:
    if _NO_THREAD in message:
        kind, message = _thread_error(kind, message)
    message, repaired = bounded(message)
    answer = {"status": "error", "kind": str(kind), "message": message}
    return {**answer, "repaired": True} if repaired else answer


def _thread_error(kind: str, message: str) -> tuple[str, str]:
    """A thread that could not start, blamed on what refused it: the run's memory or the kernel's cap on threads."""
    cause = _thread_refusals[-1] if _thread_refusals else ""
    if cause == "memory":
        return ErrorKind.CODE_MEMORY, f"{message} (no memory left for its stack within the run's memory limit)"
    if cause == "tasks":
        return kind, f"{message} (a run may have at most {kernel.TASK_LIMIT} threads, its own included)"
    return kind, message


def fault(message: str) -> dict[str, Any]:
    """A fault of edsb, not of the model (restricted only): the parent raises EdsbFault."""
    return {"status": "fault", "message": bounded(message)[0]}
