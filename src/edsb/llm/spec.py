"""`--model` strings: `local` (embedded SmolLM2), `local:<file.gguf>`, `PROVIDER:<model>` for a remote provider
(the names of `providers.PROVIDERS`: `openai`, `anthropic`, `google`, `openrouter`, ...), `replay:<run dir>`,
and `oracle` / `oracle-wrong` (hand-written reference answers and their negative control)."""

from __future__ import annotations

from dataclasses import dataclass

from edsb.errors import closest, hint
from edsb.llm.errors import ModelSpecError
from edsb.llm.providers import ALIASES, PROVIDERS

# What a spec names: the local and test models, then the remote providers by name (the keys of `PROVIDERS`).
ModelKind = str
MODEL_KINDS: tuple[ModelKind, ...] = ("local", "replay", "oracle", "oracle-wrong", *PROVIDERS)
SPEC_FORMS = (
    f"local, local:<file.gguf>, PROVIDER:<model> ({', '.join(PROVIDERS)}), replay:<run dir>, oracle or oracle-wrong"
)
NAMES = ("local", "oracle", "oracle-wrong")  # the specs that are a name alone
PREFIXES = ("local", *PROVIDERS, *ALIASES, "replay")  # the specs `prefix:<target>`


@dataclass(frozen=True)
class ModelSpec:
    kind: ModelKind
    target: str | None = None  # the model name, GGUF path or replay directory; None for the bundled model

    def __post_init__(self) -> None:
        if self.kind not in MODEL_KINDS:
            raise ValueError(f"{self.kind!r} is not a kind of model ({', '.join(MODEL_KINDS)})")

    def __str__(self) -> str:
        return self.kind if self.target is None else f"{self.kind}:{self.target}"

    @property
    def remote(self) -> bool:
        """A model behind a provider's API (which `--base-url` and `--api-key-env` address)."""
        return self.kind in PROVIDERS


def parse_model_spec(text: str) -> ModelSpec:
    """Split on the first colon only: model names such as Ollama's `qwen2.5:7b` contain colons themselves."""
    value = text.strip()
    kind, sep, target = value.partition(":")
    if kind == "local":
        if sep and not target:
            raise ModelSpecError(f"model spec {text!r} names no GGUF file after 'local:'")
        return ModelSpec("local", target or None)
    if value == "oracle":
        return ModelSpec("oracle")
    if value == "oracle-wrong":
        return ModelSpec("oracle-wrong")
    if kind in PROVIDERS or kind in ALIASES:
        provider = ALIASES.get(kind, kind)
        return ModelSpec(provider, _named_target(text, kind, target, "model name"))
    if kind == "replay":
        return ModelSpec("replay", _named_target(text, kind, target, "run directory"))
    raise ModelSpecError(f"unknown model spec {text!r}: use {SPEC_FORMS}{hint(_suggestion(value))}")


def _suggestion(value: str) -> str | None:
    """The spec meant: a near miss of a name (`oracel`) or of a prefix (`opanai:gpt-4o`); else, for a bare name, a
    remote model's (`gpt-4o`)."""
    kind, sep, target = value.partition(":")
    if sep:
        prefix = closest(kind, PREFIXES)
        return f"{prefix}:{target}" if prefix else None
    return closest(value, NAMES) or (f"openai:{value}" if value else None)


def _named_target(text: str, kind: str, target: str, what: str) -> str:
    """The stripped text after `kind:`, which providers and `replay` cannot do without."""
    if not target.strip():
        raise ModelSpecError(f"model spec {text!r} needs a {what} after '{kind}:'")
    return target.strip()
