"""Files of older edsb versions, read as this version writes them. The one place that knows what an older
`config.json` or line of `results.jsonl` left out, and what its absence meant.

Both files carry `format`, an integer (a file without one is format 1: edsb 0.1.0 and before). A reader parses the
JSON, hands the object to `current_config` or `current_result` and validates what comes back with today's model;
no model keeps a default that stands for an older version. Transcripts carry their own format
(`edsb.transcript/N`, read by `llm.transcripts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from edsb.errors import EdsbError

CONFIG_FORMAT: Final = 3  # config.json
RESULT_FORMAT: Final = 2  # a line of results.jsonl

# What format 1 meant by a setting it did not record, one entry per setting that came later.
SAMPLER_BEFORE_CHOICE: Final = "optimal"  # before `--sampler`: edsb's optimiser was the only PI sampler
SANDBOX_BEFORE_CHOICE: Final = "restricted"  # before `--sandbox`: RestrictedPython was the only sandbox
SAMPLER_SECRET_BEFORE: Final = ""  # before the sampler secret: the PI draws came from the seed alone
PERTURB_BEFORE: Final = 0  # before `--perturb`: the benchmark itself
PROMPT_CACHE_BEFORE: Final = False  # before prompt caching: no request carried cache markers
BATCH_BEFORE: Final = False  # before `--batch` (format 2 of edsb 0.2.0): every request was sent on its own
MODEL_BEFORE: Final = "local"  # a config.json without a model ran the embedded one, the default
# Before `--max-tokens`, the embedded model capped every reply at 512 tokens and seeded each request with its repeat
# number (base 0).
LOCAL_CAP_BEFORE_OPTION: Final = 512
LOCAL_SEED_BEFORE_OPTION: Final = 0


def format_of(data: Mapping[str, Any], newest: int, what: str) -> int:
    """The format a parsed file declares (1 when it declares none); one clear error for a file of a newer edsb."""
    found = data.get("format", 1)
    if isinstance(found, bool) or not isinstance(found, int) or found < 1:
        raise EdsbError(f"{what}: format {found!r} is not a format edsb writes")
    if found > newest:
        raise EdsbError(f"{what}: written by a newer edsb (format {found}, this one reads {newest}); upgrade edsb")
    return found


def _config_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    data.setdefault("sampler", SAMPLER_BEFORE_CHOICE)
    data.setdefault("sandbox", SANDBOX_BEFORE_CHOICE)
    data.setdefault("sampler_secret", SAMPLER_SECRET_BEFORE)
    data.setdefault("perturb", PERTURB_BEFORE)
    data.setdefault("prompt_cache", PROMPT_CACHE_BEFORE)
    if "max_tokens" not in data and str(data.get("model", MODEL_BEFORE)).partition(":")[0] == "local":
        data.update(max_tokens=LOCAL_CAP_BEFORE_OPTION, model_seed=data.get("model_seed", LOCAL_SEED_BEFORE_OPTION))
    return data


def _config_2_to_3(data: dict[str, Any]) -> dict[str, Any]:
    data.setdefault("batch", BATCH_BEFORE)
    return data


def _result_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    data.setdefault("sandbox", SANDBOX_BEFORE_CHOICE)
    if isinstance(data.get("sampler"), dict):
        data["sampler"] = {"method": SAMPLER_BEFORE_CHOICE, **data["sampler"]}
    return data


_Step = Callable[[dict[str, Any]], dict[str, Any]]
_CONFIG_STEPS: Final[dict[int, _Step]] = {1: _config_1_to_2, 2: _config_2_to_3}  # format N -> N + 1
_RESULT_STEPS: Final[dict[int, _Step]] = {1: _result_1_to_2}


def _upgrade(data: Mapping[str, Any], newest: int, steps: Mapping[int, _Step], what: str) -> dict[str, Any]:
    """`data` taken one format at a time to `newest` (a copy: the caller's object is left as read)."""
    current = dict(data)
    for version in range(format_of(current, newest, what), newest):
        current = steps[version](current)
    return current | {"format": newest}


def current_config(data: Mapping[str, Any], what: str = "config.json") -> dict[str, Any]:
    """A parsed config.json of any format as this version writes it (`what` names the file in an error)."""
    return _upgrade(data, CONFIG_FORMAT, _CONFIG_STEPS, what)


def current_result(data: Mapping[str, Any], what: str = "results.jsonl") -> dict[str, Any]:
    """A parsed line of results.jsonl of any format as this version writes it."""
    return _upgrade(data, RESULT_FORMAT, _RESULT_STEPS, what)
