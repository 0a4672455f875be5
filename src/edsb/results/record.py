"""One run's identity (`RunKey`) and result (`RunResult`): a line of `results.jsonl`, typed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, computed_field
from pydantic_core import PydanticSerializationError

from edsb.results.kinds import ErrorKind, RunStatus
from edsb.results.migrate import RESULT_FORMAT
from edsb.text import TextRepairs, clean_text, truncate


@dataclass(frozen=True, order=True)
class RunKey:
    """The unit of work: one benchmark run = (variant, case, distraction level, repeat)."""

    variant: str
    case: int
    distraction: int
    repeat: int

    @property
    def id(self) -> str:
        """Stable identifier: `<variant>/tc<id>-d<level>-r<repeat>` (the reference's run name, plus the variant)."""
        return f"{self.variant}/{self.run_name}"

    @property
    def run_name(self) -> str:
        """The reference's name of a run, `tc<id>-d<level>-r<repeat>`."""
        return f"tc{self.case:02d}-d{self.distraction}-r{self.repeat}"

    @property
    def file_stem(self) -> str:
        """The run's name on disk (its transcript file): the id with `__` for the slash."""
        return f"{self.variant}__{self.run_name}"

    @classmethod
    def from_id(cls, text: str) -> RunKey:
        variant, run = text.split("/", 1)
        case, level, repeat = run.split("-")
        return cls(variant, int(case.removeprefix("tc")), int(level.removeprefix("d")), int(repeat.removeprefix("r")))


def internal_error_message(fault: str) -> str:
    """The error text of a run that edsb itself failed (`internal_error`): the fault, and whose it is."""
    return f"{ErrorKind.INTERNAL_ERROR}: {fault}. This is a bug of edsb, not the model's error: please report it."


class RunResult(BaseModel):
    """What one run produced. Field order is the order of the JSON line; unknown fields of a line written by
    another edsb version are ignored on reading, and a line of an older format is read through `migrate`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal[2] = RESULT_FORMAT  # `migrate.RESULT_FORMAT`: the lines this version writes
    key: StrictStr
    variant: StrictStr
    case: StrictInt
    distraction: StrictInt
    repeat: StrictInt = 0
    scene: str | None = None
    tags: list[StrictStr] = []
    status: RunStatus
    error_kind: ErrorKind | None = None
    error: str | None = None  # `<kind>: <message>`
    reason: str | None = None  # why a judged plan failed (which character, which condition)
    plan: dict[str, Any] | None = None
    event: dict[str, Any] | None = None  # the Narrator's event: characters and activity
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # per module: {"prompt": n, "completion": n}, and where the API reports them "reasoning": n (inside completion),
    # "cached" and "cache_write": n (inside prompt, billed at the cache's rates)
    tokens: dict[str, dict[str, int]] = {}
    # What the provider billed for the run's requests, where it says (OpenRouter); left out of the line otherwise.
    billed_usd: float | None = Field(default=None, exclude_if=lambda value: value is None)
    latency_s: float = 0.0
    wall_s: float = 0.0
    model: str | None = None
    sampler: dict[str, Any] | None = None  # how positions were sampled, for PI runs: collision mode and method
    # A judged PI run sampled by the reference annealer: true when it failed but the optimal sampler, given the same
    # relationships, would have passed (the model was right, the annealer unlucky); None for every other run.
    sampler_miss: bool | None = None
    sandbox: Literal["exact", "restricted"]  # the sandbox that ran the model's code
    # Where lone surrogates sent by the model or server were replaced by U+FFFD (`narrator`, `event_parser`, `event`,
    # `code`, `error`, ...), and which fields were cut to their size limit (`error`, `reason`, `event`, `plan`).
    surrogates_replaced: list[StrictStr] = []
    truncated: list[StrictStr] = []

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented pattern
    @property
    def passed(self) -> bool:
        return self.status is RunStatus.PASSED

    @property
    def is_judged(self) -> bool:
        """Whether the run counts towards the rates; an incomplete run is retried by the next pass."""
        return self.status.is_judged

    @property
    def errored(self) -> bool:
        return self.status is RunStatus.ERROR

    @property
    def sampler_method(self) -> str | None:
        """The PI sampler of this run (`reference` / `optimal`); None when no position was sampled."""
        method = None if self.sampler is None else self.sampler.get("method")
        return None if method is None else str(method)

    @property
    def run_key(self) -> RunKey:
        return RunKey(self.variant, self.case, self.distraction, self.repeat)

    def to_line(self) -> bytes:
        """The record as one line of results.jsonl. Never fails on content: a string UTF-8 cannot hold (a lone
        surrogate that slipped past the cleaning where text enters) is replaced, and the record says so."""
        try:
            return self.model_dump_json().encode("utf-8") + b"\n"
        except (PydanticSerializationError, UnicodeEncodeError):
            data = self.model_dump(exclude={"passed"})
            repairs = TextRepairs(set(self.surrogates_replaced))
            data = repairs.json(data, "record")
            data["surrogates_replaced"] = sorted(repairs.surrogates)
            return RunResult.model_validate(data).model_dump_json().encode("utf-8") + b"\n"

    def unwritable(self, reason: str) -> RunResult:
        """This run as `incomplete` / `internal_error` when its record cannot be written: the sweep goes on, and the
        next pass retries the run."""
        reason = clean_text(truncate(reason, 1_000))
        identity = self.model_dump(include=_IDENTITY)  # what names the run; everything it produced is dropped
        return RunResult.model_validate(
            identity
            | {
                "status": RunStatus.INCOMPLETE,
                "error_kind": ErrorKind.INTERNAL_ERROR,
                "error": internal_error_message(f"the result could not be written ({reason})"),
            }
        )


_IDENTITY = {"key", "variant", "case", "distraction", "repeat", "scene", "tags", "model", "sandbox"}
