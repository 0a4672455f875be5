"""The outcome of a run and every named reason a run is an execution error or incomplete: one list for the
pipeline, the judge, the sandbox, the store and the report."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # judged, and the plan is wrong
    ERROR = "error"  # an execution error: counts against both rates
    INCOMPLETE = "incomplete"  # no verdict yet (the model never answered, or edsb failed): retried on resume

    @property
    def is_judged(self) -> bool:
        """Whether the run counts towards the rates (everything but incomplete runs)."""
        return self is not RunStatus.INCOMPLETE


class ErrorKind(StrEnum):
    """Why a run has no clean verdict. Every kind but the transport ones and `internal_error` is an execution
    error of the model (status `error`); those leave the run `incomplete`."""

    # The judge (each maps to an exception the reference evaluator raises).
    MISSING_CHARACTER = "missing_character"  # an expected character is not a key of the plan
    UNKNOWN_ACTION = "unknown_action"  # an action outside the case's labels + sit/lie
    UNKNOWN_RELATIONSHIP = "unknown_relationship"  # a relationship not starting with a known predicate
    UNKNOWN_ANCHOR = "unknown_anchor"  # an expected condition names an anchor that does not exist (broken case)
    UNKNOWN_PREDICATE = "unknown_predicate"  # a position condition with a predicate the position check lacks
    MALFORMED_CONDITION = "malformed_condition"  # an expected condition that does not parse
    MALFORMED_PLAN = "malformed_plan"  # wrong JSON shape: missing key, wrong type, position not an (x, y) pair
    # The model's code.
    CODE_SYNTAX = "code_syntax"  # the prepared code does not compile (prose executed as code, a mangled `def`, ...)
    CODE_POLICY = "code_policy"  # the sandbox refused something (import, underscore attribute, file, class, ...)
    CODE_RUNTIME = "code_runtime"  # the code raised; the message is `<ExceptionClass>: <text>`
    CODE_NO_ENTRY = "code_no_entry"  # no callable entry point after the rewrite
    CODE_TIMEOUT = "code_timeout"  # wall-clock or CPU limit reached; the worker was killed
    CODE_MEMORY = "code_memory"  # the memory limit was reached
    CODE_OUTPUT = "code_output"  # the plan or printed text exceeds the size cap
    CODE_PLAN = "code_plan"  # the code ran, but what it set cannot become a plan
    CODE_CRASH = "code_crash"  # the run's sandbox process died for another reason
    # The other stages of the framework.
    NARRATOR_FORMAT = "narrator_format"  # the Narrator's reply is not JSON or its event lacks activity/characters
    NARRATOR_NO_CHARACTER = "narrator_no_character"  # the event names none of the kept characters
    SAMPLER_ANCHOR = "sampler_anchor"  # a relationship names neither an object of the scene nor a character
    SAMPLER_PREDICATE = "sampler_predicate"  # a relationship whose predicate the sampler cannot score
    SAMPLER_SEAT = "sampler_seat"  # `sit on` / `lie on` a character
    CHARACTER_STATE = "character_state"  # a character's current state that no prompt can show
    UNSUPPORTED_VARIANT = "unsupported_variant"  # no example answer for this variant and tag (w/o Event on PI, ...)
    REQUEST_REJECTED = "request_rejected"  # the endpoint refused the request itself (too long, invalid)
    # No verdict: the run stays incomplete and is retried on resume.
    TRANSPORT_TIMEOUT = "transport_timeout"
    TRANSPORT_UNREACHABLE = "transport_unreachable"  # no connection could be opened
    TRANSPORT_CONNECTION = "transport_connection"  # a connection broke after opening
    TRANSPORT_HTTP = "transport_http"
    TRANSPORT_OVERSIZED = "transport_oversized"  # the reply's body or head is over the size limits (SECURITY.md)
    TRANSPORT_INVALID_RESPONSE = "transport_invalid_response"
    TRANSPORT_REJECTED = "transport_rejected"
    INTERNAL_ERROR = "internal_error"  # a fault of edsb itself, never the model's: please report it
    # `edsb score` only: an input line that cannot be scored.
    INVALID_INPUT = "invalid_input"

    @classmethod
    def transport(cls, kind: str) -> ErrorKind:
        """The kind of a run whose model gave no completion for the LLM layer's reason `kind`."""
        return cls(f"transport_{kind}")


class RunError(Exception):
    """Something that makes one benchmark run an execution error (not a user error): raised only where the
    reference's run fails on what the model answered. Subclasses set `kind`."""

    kind: ErrorKind
