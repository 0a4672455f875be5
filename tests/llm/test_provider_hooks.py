"""What a provider's own module answers: Azure's sign-in with Microsoft Entra ID when no key is given (a real
`DefaultAzureCredential`, its managed identity served by a token endpoint on loopback), and Ollama's cut prompts said
the moment the server first shows them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from edsb.llm import ChatRequest, Message, OpenAIChatModel, TransportError, build_model, tell_window_note
from edsb.llm.providers import PROVIDERS
from edsb.llm.providers.azure import azure_host
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.provider_fakes import azure_classic

REQUEST = ChatRequest(messages=(Message(role="user", content="Where does Ryan stand?"),), temperature=0.1)


class TokenEndpoint:
    """App Service's managed-identity endpoint (`IDENTITY_ENDPOINT`), which `DefaultAzureCredential` asks for a token:
    it hands out `tok-<n>`, valid for an hour, and records each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.refuse = False  # answer 400, as for a scope the identity may not have
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                endpoint.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                token = {"access_token": f"tok-{len(endpoint.requests)}", "expires_on": str(int(time.time()) + 3600)}
                body = json.dumps({**token, "resource": "https://cognitiveservices.azure.com", "token_type": "Bearer"})
                if endpoint.refuse:
                    body = json.dumps({"error": "invalid_scope", "error_description": "no such scope"})
                self.send_response(400 if endpoint.refuse else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/msi/token"


@pytest.fixture
def token_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[TokenEndpoint]:
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AZURE_FEDERATED_TOKEN_FILE", raising=False)
    endpoint = TokenEndpoint()
    endpoint.thread.start()
    monkeypatch.setenv("IDENTITY_ENDPOINT", endpoint.url)
    monkeypatch.setenv("IDENTITY_HEADER", "not-a-secret")
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


def test_azure_without_a_key_signs_in_with_entra_id(token_endpoint: TokenEndpoint) -> None:
    with OpenAIServer(validator=azure_classic) as server:
        model = build_model("azure:eval-4o", base_url=server.root_url, cache=False)

        async def twice() -> None:
            for _ in range(2):
                await model.complete(REQUEST)
            await model.aclose()

        asyncio.run(twice())
        sent = server.requests
    assert [request.headers.get("authorization") for request in sent] == ["Bearer tok-1", "Bearer tok-1"]
    assert all("api-key" not in request.headers for request in sent)
    assert sent[0].query == "api-version=2024-10-21"  # the classic deployment's rules stay
    (path, headers), *renewed = token_endpoint.requests
    assert not renewed  # the hour-long token is kept, not fetched per request
    assert "resource=https://cognitiveservices.azure.com" in path and headers["x-identity-header"] == "not-a-secret"


def test_a_sign_in_without_a_token_stops_the_sweep_naming_the_key(token_endpoint: TokenEndpoint) -> None:
    token_endpoint.refuse = True
    with OpenAIServer(validator=azure_classic) as server:
        model = build_model("azure:eval-4o", base_url=server.root_url, cache=False, max_retries=0)

        async def once() -> None:
            try:
                await model.complete(REQUEST)
            finally:
                await model.aclose()

        with pytest.raises(TransportError) as refused:
            asyncio.run(once())
        sent = len(server.requests)
    assert sent == 0 and refused.value.client_refused  # nothing sent; no request of the run could succeed
    assert "az login" in str(refused.value) and "export AZURE_OPENAI_API_KEY" in str(refused.value)
    assert "ManagedIdentityCredential" in str(refused.value)  # the credential's own account, kept


def test_a_key_wins_over_the_sign_in(token_endpoint: TokenEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "key-not-a-secret")
    with OpenAIServer(validator=azure_classic) as server:
        model = build_model("azure:eval-4o", base_url=server.root_url, cache=False)

        async def once() -> None:
            await model.complete(REQUEST)
            await model.aclose()

        asyncio.run(once())
        (sent,) = server.requests
    assert sent.headers["api-key"] == "key-not-a-secret" and "authorization" not in sent.headers
    assert not token_endpoint.requests


@pytest.mark.parametrize(
    ("url", "azure"),
    [
        ("https://my-resource.openai.azure.com/openai/v1", True),
        ("https://my-resource.services.ai.azure.com/openai/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://127.0.0.1:8000/v1", False),
    ],
)
def test_an_azure_resource_is_known_by_its_host(url: str, azure: bool) -> None:
    """The v1 endpoint behind `openai:` signs in too, where no key is given; a self-hosted server gets none."""
    assert azure_host(url) is azure


def reply_cut_to(window: int) -> Callable[[RecordedRequest], Reply]:
    def reply(request: RecordedRequest) -> Reply:
        return Reply.completion("ok", prompt_tokens=min(len(request.body) // 4, window))

    return reply


def test_ollamas_cut_prompt_is_told_at_the_first_reply_that_shows_it() -> None:
    long = ChatRequest(messages=(Message(role="user", content="Ryan walks to the sofa. " * 2000),), temperature=0.1)
    told: list[str] = []
    with OpenAIServer(reply_cut_to(1024)) as server:
        model = OpenAIChatModel("qwen3:8b", base_url=server.base_url, provider=PROVIDERS["ollama"])
        tell_window_note(model, told.append)

        async def run() -> list[int]:
            counts = []
            for _ in range(2):
                await model.complete(long)
                counts.append(len(told))
            await model.aclose()
            return counts

        counts = asyncio.run(run())
    assert counts == [1, 1]  # at the first reply, and only once
    assert told[0].startswith("the server counted 1,024 prompt tokens") and told[0] == model.window_note
