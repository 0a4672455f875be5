"""Azure OpenAI: `azure:<deployment>` posts to a classic deployment, `<endpoint>/openai/deployments/<deployment>/
chat/completions?api-version=<version>`, with the key in the `api-key` header; the v1 endpoint speaks OpenAI's own
API (`openai:<deployment> --base-url https://<resource>.openai.azure.com/openai/v1`).

Without a key (no `AZURE_OPENAI_API_KEY`, no `--api-key-env`), either signs in with Microsoft Entra ID: a bearer
token from `azure-identity`'s `DefaultAzureCredential` (extra `azure`: environment, workload or managed identity,
the Azure CLI's sign-in, ...) for Azure AI's scope, renewed before it expires
(https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/managed-identity).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from edsb.llm.errors import ApiKeyError
from edsb.llm.providers.base import BearerSource, Provider

# The scope of Azure OpenAI's (Azure AI services') bearer tokens.
ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
# A token this close to its expiry is renewed before a request goes out with it.
RENEW_S = 300.0
# The hosts of Azure OpenAI's resources, classic and v1 endpoints alike.
AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")


class EntraToken:
    """A bearer token from `DefaultAzureCredential`, fetched on first use (in a thread: the credential blocks) and
    renewed once within `RENEW_S` of its expiry."""

    def __init__(self, credential: Any) -> None:
        self._credential = credential
        self._token = ""
        self._expires_on = 0.0

    def _renew(self) -> None:
        access = self._credential.get_token(ENTRA_SCOPE)
        self._token, self._expires_on = access.token, float(access.expires_on)

    async def header(self) -> str:
        """The `Authorization` header's value for the next request."""
        if self._expires_on - time.time() < RENEW_S:
            await asyncio.to_thread(self._renew)
        return f"Bearer {self._token}"


def entra_token(provider: Provider) -> EntraToken:
    """Entra ID's token source; a one-line error naming the key variable and the extra without `azure-identity`."""
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise ApiKeyError(
            f"{provider.key_env} is not set: export it, name the key variable with --api-key-env, or sign in with "
            "Microsoft Entra ID: pip install 'edsb[azure]'"
        ) from None
    return EntraToken(DefaultAzureCredential())


def azure_host(base_url: str) -> bool:
    """Whether the address is an Azure OpenAI resource's."""
    return (urlsplit(base_url).hostname or "").lower().endswith(AZURE_HOSTS)


@dataclass(frozen=True)
class Azure(Provider):
    """A classic deployment: without a key, Entra ID signs in, wherever `--base-url` points."""

    def sign_in(self, base_url: str) -> BearerSource | None:
        return entra_token(self)


# The deployment's name is not a model name, so the token cap goes as `max_completion_tokens`, which every model takes
# from API version 2024-10-21 (https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference). `keyless`: Entra
# ID signs in without one.
ROW = Azure(
    "azure",
    "openai",
    "AZURE_OPENAI_API_KEY",
    None,
    keyless=True,
    base_url_env="AZURE_OPENAI_ENDPOINT",
    chat_path="/openai/deployments/{model}/chat/completions",
    key_header="api-key",
    api_version_env="OPENAI_API_VERSION",
    api_version="2024-10-21",
    cap_field="max_completion_tokens",
    batch="openai",
)
