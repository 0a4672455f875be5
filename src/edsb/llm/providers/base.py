"""What every remote provider answers, whatever API it speaks: the hooks of `Provider`.

A provider is one frozen row of data (its host, key variable, default token cap, extra) and a class that says the
rest, each in one place: which client speaks its API (`client`), what its API refuses before any request, naming
the option that fixes it (`refuses`), which paper default it cannot be sent and why (`temperature_not_sent`,
`json_mode_not_sent`, `no_seed`), which refusal phrases of its error bodies name a fix of their own
(`refusal_fixes`), whose list prices its models cost (`priced_as`), what signs in without a key (`sign_in`),
whether the server may cut prompts short without an error (`cut_note`) and its batch route (`batch`). The request
body, the reply's reasoning and usage are built and read by the provider's module (`providers.openai`,
`providers.anthropic`, ...), which its client calls.

The defaults are those of an OpenAI-compatible host; a provider overrides only what differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from edsb.llm.protocol import ChatModel

Api = Literal["openai", "anthropic", "google", "responses"]
# The clouds that serve Claude and Gemini under their own credentials (`llm.cloud`).
Cloud = Literal["bedrock", "vertex"]


class BearerSource(Protocol):
    """A sign-in that stands for a key (Microsoft Entra ID's): the `Authorization` header of the next request."""

    async def header(self) -> str: ...


class GenerationSettings(Protocol):
    """The run's generation settings as the rules read them (the planning layer's `GenerationSettings`)."""

    @property
    def temperature(self) -> float | None: ...
    @property
    def json_mode(self) -> bool: ...
    @property
    def reasoning_effort(self) -> str | None: ...
    @property
    def thinking_budget(self) -> int | None: ...
    @property
    def thinking_level(self) -> str | None: ...
    @property
    def reasoning_sent(self) -> bool: ...
    def model_dump(self) -> dict[str, Any]: ...


LEVEL_IS_GEMINIS = "--thinking-level is Gemini 3's setting (google:<model>); use --reasoning-effort here"
BUDGET_NOT_HERE = "--thinking-budget is Anthropic's and Gemini's setting; use --reasoning-effort here"


@dataclass(frozen=True)
class Provider:
    """One provider. `base_url` may hold `{model}` (Lepton serves each model at a host of its own); None: the SDK's
    own default host. `max_tokens`: the cap sent when `--max-tokens` is not given (None: no cap is sent).

    What an OpenAI-compatible host does apart from OpenAI's API: `body` is added to every request (OpenRouter's
    `provider.require_parameters`, so that a setting a model does not take is refused, not dropped); `effort_object`
    sends the effort as `reasoning: {effort}` (OpenRouter's form); `ignores_temperature` names the models (by name
    prefix) whose thinking mode ignores the temperature without an error, so none is sent and the run says why."""

    name: str
    api: Api
    key_env: str
    base_url: str | None
    max_tokens: int | None = None
    takes_seed: bool = True  # whether the API has a sampling seed for `--model-seed`
    extra: str | None = None  # the pip extra that installs its SDK
    # No key is needed at its default host: a server on the user's own machine (Ollama), or a sign-in (`sign_in`).
    keyless: bool = False
    body: Mapping[str, Any] = field(default_factory=dict)
    effort_object: bool = False
    ignores_temperature: tuple[str, ...] = ()
    # Where the host is not OpenAI's shape (Azure's classic deployments): the variable naming the endpoint, the chat
    # path (may hold `{model}`: the deployment), the header that carries the key (None: a bearer token), the
    # `api-version` query (its variable, then its default), and a token-cap field every model takes.
    base_url_env: str | None = None
    chat_path: str = "/chat/completions"
    key_header: str | None = None
    api_version_env: str | None = None
    api_version: str | None = None
    cap_field: str | None = None
    # A cloud's route to Claude or Gemini (`llm.cloud`): the cloud, and the variables naming its region and project
    # (the SDK's own names); its credentials are the cloud's, not a key.
    cloud: Cloud | None = None
    region_env: str | None = None
    project_env: str | None = None
    # The provider's batch API (`llm.batch`), by the name of its route there; None: none.
    batch: str | None = None

    def url_for(self, model: str) -> str | None:
        return None if self.base_url is None else self.base_url.format(model=model)

    def temperature_ignored(self, model: str) -> str | None:
        """Why `model` gets no temperature from this provider, which would ignore it without an error."""
        if model.lower().startswith(self.ignores_temperature) and self.ignores_temperature:
            return f"{self.name}'s thinking mode ignores the temperature, without an error"
        return None

    # The hooks.
    def client(self, model: str, options: dict[str, Any], *, prompt_cache: bool) -> ChatModel:
        """The client of this provider's API for `model` (`options`: the transport's, as `build_model` passes them)."""
        from edsb.llm.openai_client import OpenAIChatModel

        return OpenAIChatModel(model, provider=self, **options)

    def refuses(self, model: str, settings: GenerationSettings) -> str | None:
        """The one-line reason this API refuses these settings for every request, with the fix; None if none. Asked
        after the checks every provider shares (`rules.provider_refuses`)."""
        if settings.thinking_level is not None:
            return LEVEL_IS_GEMINIS
        if settings.thinking_budget is not None:
            return BUDGET_NOT_HERE
        return self.temperature_refused(model, settings)

    def temperature_refused(self, model: str, settings: GenerationSettings) -> str | None:
        """An explicit temperature for a model that would ignore it."""
        ignored = self.temperature_ignored(model)
        if ignored is not None and settings.temperature is not None:
            return f"{ignored}: leave out --temperature or pass --temperature default"
        return None

    def temperature_not_sent(self, model: str, settings: Mapping[str, Any]) -> str | None:
        """Why `model` gets no temperature when none is given (None: it gets the paper's)."""
        return self.temperature_ignored(model)

    def json_mode_not_sent(self) -> str | None:
        """Why JSON mode, asked for, does not go to this API (None: it does)."""
        return None

    def no_seed(self) -> str:
        """Why `--model-seed` is refused where the API has no seed (`takes_seed` False)."""
        return f"{self.name}'s API has none"

    def refusal_fixes(self) -> tuple[tuple[str, str], ...]:
        """(phrase, fix): a refusal whose message holds the phrase (lower case) is fixed so, whatever field it names."""
        return ()

    def priced_as(self, model: str) -> tuple[str, str]:
        """The provider and model name whose list price `model` costs here (`report.cost`)."""
        return self.name, model

    def sign_in(self, base_url: str) -> BearerSource | None:
        """What signs the requests in when no key is given (None: the placeholder key goes, for a server that needs
        none). An Azure OpenAI resource's address (its v1 endpoint behind `openai:`) signs in with Entra ID."""
        from edsb.llm.providers.azure import azure_host, entra_token

        return entra_token(self) if azure_host(base_url) else None

    def cut_note(self, base_url: str, counted: int, body_bytes: int) -> str | None:
        """What to tell the user when the server counted far fewer prompt tokens than were sent, without an error
        (Ollama's context window); None: nothing to tell."""
        from edsb.llm.providers.ollama import at_ollama_port, window_note

        return window_note(counted, body_bytes) if at_ollama_port(base_url) else None
