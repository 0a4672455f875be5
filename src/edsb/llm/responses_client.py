"""`openai-responses:<model>`: OpenAI's Responses API through the official `openai` SDK (extra `openai`), over the
SDK clients' httpx2 transport. What is sent and how the reply reads is the provider's (`providers.openai_responses`).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from edsb.llm.errors import ProviderSdkError
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.providers import OPENAI_URL, PROVIDERS
from edsb.llm.providers.openai_responses import read_response, responses_body
from edsb.llm.remote import one_line
from edsb.llm.retry import AttemptFailure, retry_after_s
from edsb.llm.sdk_client import SdkChatModel, status_failure

if TYPE_CHECKING:
    import httpx2


class OpenAIResponsesModel(SdkChatModel):
    """A model behind OpenAI's Responses API (`client.responses.create`)."""

    default_url = OPENAI_URL

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, PROVIDERS["openai-responses"], **options)

    def _sdk(self) -> Any:
        try:
            import openai
        except ImportError:
            raise ProviderSdkError("openai-responses: models need the SDK: pip install 'edsb[openai]'") from None
        return openai

    def _make_client(self, http: httpx2.AsyncClient) -> Any:
        return self._sdk().AsyncOpenAI(api_key=self._api_key, base_url=self.base_url, http_client=http, max_retries=0)

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of `responses.create` (`providers.openai_responses.responses_body`)."""
        return responses_body(self.model, request)

    def _prepare(self, request: ChatRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        params = self.params(request)
        return params, {name: value for name, value in params.items() if name not in ("model", "input")}

    async def _send(self, client: Any, prepared: tuple[dict[str, Any], Any]) -> tuple[Any, float]:
        started = time.perf_counter()
        response = await client.responses.create(**prepared[0])
        return response, time.perf_counter() - started

    def _parse(self, result: Any, latency_s: float, attempts: int, prepared: Any) -> ChatResponse:
        return read_response(result, self.model, latency_s, attempts, prepared[1])

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        openai = self._sdk()
        if isinstance(exc, openai.APIStatusError):
            response = exc.response
            return status_failure(response.status_code, response.content, retry_after_s(response.headers))
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
            return AttemptFailure("invalid_response", one_line(f"the reply is not a response: {exc}"))
        return None
