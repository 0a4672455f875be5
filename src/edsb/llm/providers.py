"""The remote providers `--model PROVIDER:MODEL` names: where each is served, which variable holds its key, which API
it speaks and what it sends by default.

The names, hosts, key variables and token caps are those of the official implementation's LLM client (Lim et al.,
ICCV 2025), so a command written for it names the same models here; today's hosts (OpenRouter, DeepSeek, xAI,
Mistral, Together, Fireworks, Ollama) follow, each with the key variable and host its users know. The hosts that
speak OpenAI's chat completions API share edsb's aiohttp client; Anthropic and Google are reached through their
official SDKs (optional extras).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

Api = Literal["openai", "anthropic", "google", "responses"]
# The clouds that serve Claude and Gemini under their own credentials (`llm.cloud`).
Cloud = Literal["bedrock", "vertex"]


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
    keyless: bool = False  # a server on the user's own machine (Ollama): no key is needed at its default host
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

    def url_for(self, model: str) -> str | None:
        return None if self.base_url is None else self.base_url.format(model=model)

    def temperature_ignored(self, model: str) -> str | None:
        """Why `model` gets no temperature from this provider, which would ignore it without an error."""
        if model.lower().startswith(self.ignores_temperature) and self.ignores_temperature:
            return f"{self.name}'s thinking mode ignores the temperature, without an error"
        return None


OPENAI_URL = "https://api.openai.com/v1"
# The reference caps Anthropic's and Google's replies at 2,048 tokens and sends no cap to the OpenAI-compatible hosts.
SDK_MAX_TOKENS = 2048

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("openai", "openai", "OPENAI_API_KEY", OPENAI_URL),
        Provider("deepinfra", "openai", "DEEPINFRA_API_TOKEN", "https://api.deepinfra.com/v1/openai"),
        Provider("groq", "openai", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
        Provider("cerebras", "openai", "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1"),
        Provider("lepton", "openai", "LEPTON_API_TOKEN", "https://{model}.lepton.run/api/v1"),
        Provider(
            "anthropic",
            "anthropic",
            "ANTHROPIC_API_KEY",
            None,
            max_tokens=SDK_MAX_TOKENS,
            takes_seed=False,
            extra="anthropic",
        ),
        Provider("google", "google", "GEMINI_API_KEY", None, max_tokens=SDK_MAX_TOKENS, extra="google"),
        # Claude and Gemini on the clouds, under the cloud's own credentials (`llm.cloud`); requests as built for the
        # direct APIs. `key_env`: where an access token or Bedrock API key may be given instead.
        Provider(
            "anthropic-bedrock",
            "anthropic",
            "AWS_BEARER_TOKEN_BEDROCK",
            None,
            max_tokens=SDK_MAX_TOKENS,
            takes_seed=False,
            extra="bedrock",
            keyless=True,
            cloud="bedrock",
            base_url_env="ANTHROPIC_BEDROCK_BASE_URL",
            region_env="AWS_REGION",
        ),
        Provider(
            "anthropic-vertex",
            "anthropic",
            "",
            None,
            max_tokens=SDK_MAX_TOKENS,
            takes_seed=False,
            extra="vertex",
            keyless=True,
            cloud="vertex",
            base_url_env="ANTHROPIC_VERTEX_BASE_URL",
            region_env="CLOUD_ML_REGION",
            project_env="ANTHROPIC_VERTEX_PROJECT_ID",
        ),
        Provider(
            "google-vertex",
            "google",
            "",
            None,
            max_tokens=SDK_MAX_TOKENS,
            extra="vertex",
            keyless=True,
            cloud="vertex",
            base_url_env="GOOGLE_VERTEX_BASE_URL",
            region_env="GOOGLE_CLOUD_LOCATION",
            project_env="GOOGLE_CLOUD_PROJECT",
        ),
        Provider("openai-responses", "responses", "OPENAI_API_KEY", OPENAI_URL, takes_seed=False, extra="openai"),
        # Azure OpenAI's classic deployments: `azure:<deployment>`. The deployment's name is not a model name, so the
        # token cap goes as `max_completion_tokens`, which every model takes from API version 2024-10-21
        # (https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference).
        Provider(
            "azure",
            "openai",
            "AZURE_OPENAI_API_KEY",
            None,
            base_url_env="AZURE_OPENAI_ENDPOINT",
            chat_path="/openai/deployments/{model}/chat/completions",
            key_header="api-key",
            api_version_env="OPENAI_API_VERSION",
            api_version="2024-10-21",
            cap_field="max_completion_tokens",
        ),
        # Today's hosts, by name, with the key variable and host their users know.
        Provider(
            "openrouter",
            "openai",
            "OPENROUTER_API_KEY",
            "https://openrouter.ai/api/v1",
            body={"provider": {"require_parameters": True}},
            effort_object=True,
        ),
        Provider(
            "deepseek",
            "openai",
            "DEEPSEEK_API_KEY",
            "https://api.deepseek.com/v1",
            ignores_temperature=("deepseek-reasoner",),
        ),
        Provider("xai", "openai", "XAI_API_KEY", "https://api.x.ai/v1"),
        Provider("mistral", "openai", "MISTRAL_API_KEY", "https://api.mistral.ai/v1"),
        Provider("together", "openai", "TOGETHER_API_KEY", "https://api.together.xyz/v1"),
        Provider("fireworks", "openai", "FIREWORKS_API_KEY", "https://api.fireworks.ai/inference/v1"),
        Provider("ollama", "openai", "OLLAMA_API_KEY", "http://localhost:11434/v1", keyless=True),
    )
}
# The reference's `groq-native` calls Groq's own SDK, which posts the very same chat completion to the same host.
ALIASES = {"groq-native": "groq"}


def get_provider(name: str) -> Provider:
    return PROVIDERS[ALIASES.get(name, name)]


@cache
def anthropic_api() -> tuple[str, frozenset[str]] | None:
    """The Messages API version the installed `anthropic` SDK speaks and the parameters its request type names (that
    version's API: 2026-10-21 has no `temperature`, `top_p` or `top_k`); None without the SDK. Read once, for the
    client's requests and for the checks made before any request."""
    try:
        version = importlib.import_module("anthropic._constants").ANTHROPIC_API_VERSION
        params = importlib.import_module("anthropic.types.message_create_params").MessageCreateParamsNonStreaming
    except ImportError:
        return None
    return str(version), frozenset(params.__required_keys__ | params.__optional_keys__)


# Claude's thinking by model, as Anthropic's documentation gives it on 2026-12-01
# (https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking): Claude 4.6 and later take adaptive
# thinking (`thinking: {type: adaptive}`, its depth set by `output_config.effort`); Opus 4.7 and later take nothing
# else, and refuse a thinking budget. The SDK names the models but not what each takes, hence this table.
ADAPTIVE_SINCE = (4, 6)
BUDGET_REFUSED_SINCE = {"opus": (4, 7)}
_CLAUDE = re.compile(r"claude-(?P<family>opus|sonnet|haiku)-(?P<major>\d+)(?:-(?P<minor>\d{1,2})(?!\d))?(?:-\d{8})?")


def claude_version(model: str) -> tuple[str, tuple[int, int]] | None:
    """A Claude model's family and version (`claude-opus-4-7` is opus 4.7), under any `org/` or `anthropic.`
    prefix; None for a name of another shape."""
    match = _CLAUDE.search(model.lower())
    if match is None:
        return None
    return match["family"], (int(match["major"]), int(match["minor"] or 0))


def claude_adaptive(model: str) -> bool:
    """Whether the model takes adaptive thinking."""
    found = claude_version(model)
    return found is not None and found[1] >= ADAPTIVE_SINCE


def claude_refuses_budget(model: str) -> bool:
    """Whether the model refuses a thinking budget (adaptive thinking only)."""
    found = claude_version(model)
    since = BUDGET_REFUSED_SINCE.get(found[0]) if found is not None else None
    return found is not None and since is not None and found[1] >= since
