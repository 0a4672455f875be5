"""`openai-responses:<model>`: OpenAI's Responses API through the official `openai` SDK (extra `openai`), the only
route to the models OpenAI serves there alone (o1-pro, o3-pro, gpt-5-pro, the codex models), and a choice, recorded
in the model's identity, for the others.

What is sent: the messages as they are, as `input` (the system prompt keeps its role, so prompts stay the paper's
byte for byte); the temperature and top_p when given; JSON mode as `text.format` `json_object`; the token cap as
`max_output_tokens` when given; `reasoning` with the effort when given and a summary asked for, so the model's
reasoning is kept as reasoning; `store: false`. No seed: the API has none. The reply's reasoning items are the
reasoning, its output text the answer; `output_tokens` include the reasoning tokens, as billed, and the cached input
tokens are recorded apart.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from edsb.llm.errors import ProviderSdkError
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.providers import OPENAI_URL, PROVIDERS
from edsb.llm.reasoning import Split, split_think
from edsb.llm.remote import one_line, token_count
from edsb.llm.retry import AttemptFailure, retry_after_s
from edsb.llm.sdk_client import SdkChatModel, status_failure

if TYPE_CHECKING:
    import httpx2

# The models OpenAI serves only through the Responses API, by name, as its model pages give them on 2026-12-01
# (https://platform.openai.com/docs/models): the `-pro` reasoning models, the codex models, deep research.
RESPONSES_ONLY_PRO = ("o1-pro", "o3-pro", "gpt-5-pro", "gpt-5.")
# How the API says why a reply stopped short (`incomplete_details.reason`), as chat completions' finish reasons.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def responses_only(model: str) -> bool:
    """Whether OpenAI serves `model` through the Responses API alone (chat completions answers 404)."""
    name = model.rsplit("/", 1)[-1].lower()
    pro = name.startswith(RESPONSES_ONLY_PRO) and ("-pro" in name)
    return pro or "codex" in name or "deep-research" in name


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
        """The keyword arguments of `responses.create`; a setting left unset is not sent."""
        params: dict[str, Any] = {
            "model": self.model,
            "input": [{"role": message.role, "content": message.content} for message in request.messages],
            "store": False,
        }
        for name, value in (("temperature", request.temperature), ("top_p", request.top_p)):
            if value is not None:
                params[name] = value
        if request.json_mode:
            params["text"] = {"format": {"type": "json_object"}}
        if request.max_tokens is not None:
            params["max_output_tokens"] = request.max_tokens
        reasoning: dict[str, Any] = {"summary": "auto"}  # the reasoning kept as reasoning, not lost
        if request.reasoning_effort is not None:
            reasoning["effort"] = request.reasoning_effort
        params["reasoning"] = reasoning
        return params

    def _prepare(self, request: ChatRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        params = self.params(request)
        return params, {name: value for name, value in params.items() if name not in ("model", "input")}

    async def _send(self, client: Any, prepared: tuple[dict[str, Any], Any]) -> tuple[Any, float]:
        started = time.perf_counter()
        response = await client.responses.create(**prepared[0])
        return response, time.perf_counter() - started

    def _parse(self, result: Any, latency_s: float, attempts: int, prepared: Any) -> ChatResponse:
        output = getattr(result, "output", None)
        usage = getattr(result, "usage", None)
        if not isinstance(output, list) or usage is None:
            raise AttemptFailure("invalid_response", "the reply is not a response (no output or usage)")
        split, refusal = _split_output(output)
        details = getattr(usage, "output_tokens_details", None)
        cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", None)
        reasoning = getattr(details, "reasoning_tokens", None)
        incomplete = getattr(getattr(result, "incomplete_details", None), "reason", None)
        status = getattr(result, "status", None)
        model = getattr(result, "model", None)
        return ChatResponse(
            **split.fields(),
            prompt_tokens=token_count(getattr(usage, "input_tokens", None), "usage.input_tokens"),
            completion_tokens=token_count(getattr(usage, "output_tokens", None), "usage.output_tokens"),
            reasoning_tokens=None if reasoning is None else token_count(reasoning, "usage.output_tokens_details"),
            cached_tokens=None if cached is None else token_count(cached, "usage.input_tokens_details"),
            latency_s=latency_s,
            model=model if isinstance(model, str) and model else self.model,
            finish_reason=_INCOMPLETE.get(str(incomplete), str(incomplete)) if incomplete else _stop(status),
            attempts=attempts,
            refusal=refusal,
            sent=prepared[1],
        )

    def _sdk_failure(self, exc: Exception) -> AttemptFailure | None:
        openai = self._sdk()
        if isinstance(exc, openai.APIStatusError):
            response = exc.response
            return status_failure(response.status_code, response.content, retry_after_s(response.headers))
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
            return AttemptFailure("invalid_response", one_line(f"the reply is not a response: {exc}"))
        return None


def _stop(status: Any) -> str | None:
    return "stop" if status == "completed" else status if isinstance(status, str) else None


def _split_output(output: list[Any]) -> tuple[Split, str | None]:
    """The answer from the message items' output text, the reasoning from the reasoning items' summaries, and a
    refusal where the model gave one; other items are noted and left out."""
    texts: list[str] = []
    summaries: list[str] = []
    refusal: str | None = None
    unread: list[str] = []
    for item in output:
        kind = getattr(item, "type", None)
        if kind == "reasoning":
            summaries += [part.text for part in getattr(item, "summary", None) or [] if isinstance(part.text, str)]
        elif kind == "message":
            for part in getattr(item, "content", None) or []:
                if getattr(part, "type", None) == "output_text" and isinstance(part.text, str):
                    texts.append(part.text)
                elif getattr(part, "type", None) == "refusal":
                    refusal = getattr(part, "refusal", None) or "the model refused"
        else:
            unread.append(f"unreadable: an output item of type {kind!r}")
    split = split_think("".join(texts))
    for summary in summaries:
        split.add(summary, "reasoning_summary")
    for note in unread:
        split.add("", note)
    return split, refusal
