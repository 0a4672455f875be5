"""What a child sends back, built the same way for both sandboxes: the plan the code set as JSON text of bounded
size (`pack`), the model's error (`error`), or, under `restricted` only, a fault of edsb's (`fault`). Every string is
valid Unicode, and an answer says when one had to be repaired."""

from __future__ import annotations

import json
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


def error(kind: str, message: str) -> dict[str, Any]:
    if _NO_THREAD in message:  # the kernel's cap on tasks (RLIMIT_NPROC), met by the model's own threads
        message = f"{message} (a run may have at most {kernel.TASK_LIMIT} threads, its own included, in its memory)"
    message, repaired = bounded(message)
    answer = {"status": "error", "kind": str(kind), "message": message}
    return {**answer, "repaired": True} if repaired else answer


def fault(message: str) -> dict[str, Any]:
    """A fault of edsb, not of the model (restricted only): the parent raises EdsbFault."""
    return {"status": "fault", "message": bounded(message)[0]}
