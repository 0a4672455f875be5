"""`--model edsb/oracle` and `edsb/oracle-wrong`: edsb's oracle as an Inspect model provider, to check an Inspect
install offline, without a key or an endpoint.

`inspect eval edsb/edsb_table1 --model edsb/oracle` must score 1.0 and `edsb/oracle-wrong` 0.0, as `edsb run
--model oracle` does: the answers are the oracle's (`edsb.llm.oracle`), everything else is the eval's own path
through Inspect (its model API, generate config, logs) and edsb's pipeline. Inspect's `mockllm/model` cannot serve
here: its answers are not the benchmark's, and it counts tokens with tiktoken, whose encoding file it downloads on
first use. This provider counts them as the oracle does (about four characters a token), so nothing is fetched.

Model arguments (`-M name=value`): `data`, the data directory the oracle recognises its cases in (as the task's
`-T data=`), and `perturb`, the task's `-T perturb=` seed, whose renaming the oracle's answers must follow.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelCall, ModelOutput, ModelUsage
from inspect_ai.tool import ToolChoice, ToolInfo

from edsb.errors import UsageError
from edsb.llm.oracle import OracleChatModel
from edsb.llm.protocol import ChatRequest, Message

MODELS = ("oracle", "oracle-wrong")
JSON_OBJECT = {"type": "json_object"}


class OracleAPI(ModelAPI):
    """The oracle (or its negative control) answering Inspect's generate calls."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        data: str | None = None,
        perturb: int = 0,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        if model_name not in MODELS:
            raise UsageError(f"unknown edsb model {model_name!r}: use edsb/oracle or edsb/oracle-wrong")
        if model_args:
            raise UsageError(f"edsb/{model_name} takes the model arguments data and perturb, not {sorted(model_args)}")
        self.oracle = OracleChatModel(data, wrong=model_name == "oracle-wrong", perturb=int(perturb))

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> tuple[ModelOutput, ModelCall]:
        json_mode = (config.extra_body or {}).get("response_format") == JSON_OBJECT
        request = ChatRequest(
            messages=tuple(_message(message) for message in input),
            temperature=config.temperature,
            json_mode=json_mode,
        )
        response = await self.oracle.complete(request)
        output = ModelOutput.from_content(self.model_name, response.text, stop_reason="stop")
        output.usage = ModelUsage(
            input_tokens=response.prompt_tokens,
            output_tokens=response.completion_tokens,
            total_tokens=response.prompt_tokens + response.completion_tokens,
        )
        # What a chat-completions server would have received: edsb checks that its request arrived whole.
        sent: dict[str, Any] = {
            "model": self.model_name,
            "messages": [message.model_dump(include={"role", "content"}) for message in request.messages],
            "temperature": config.temperature,
        }
        if json_mode:
            sent["response_format"] = JSON_OBJECT
        return output, ModelCall.create(sent, {"content": response.text})

    async def count_text_tokens(self, text: str) -> int:
        """The oracle's estimate instead of Inspect's tiktoken count, which downloads its encoding on first use."""
        return len(text) // 4 + 1


def _message(message: ChatMessage) -> Message:
    if message.role == "tool":
        raise UsageError("the edsb oracle answers the benchmark's prompts only, which use no tools")
    return Message(role=message.role, content=message.text)
