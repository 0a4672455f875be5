"""From a `--model` string and the command-line options to a ready `ChatModel`; and `check_model`, its smoke test."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from edsb.errors import EdsbError, UsageError
from edsb.llm.cache import CachedChatModel, ResponseCache
from edsb.llm.errors import TransportError
from edsb.llm.local import DEFAULT_MAX_TOKENS as LOCAL_MAX_TOKENS
from edsb.llm.local import LocalChatModel
from edsb.llm.openai_client import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_S
from edsb.llm.protocol import ChatModel, ChatRequest, Message
from edsb.llm.providers import get_provider
from edsb.llm.replay import ReplayChatModel
from edsb.llm.retry import RetryPolicy
from edsb.llm.spec import ModelSpec, parse_model_spec
from edsb.results.rundir import CONFIG_FILE
from edsb.settings.limits import CHECK_TIMEOUT_S

DEFAULT_MAX_RETRIES = RetryPolicy().max_retries
# No token cap goes out unless asked (the paper's protocol): a small model in JSON mode may generate until the
# timeout, and a one-request-at-a-time server (llama.cpp's) queues each retry behind the unfinished answer.
UNCAPPED_TIMEOUT_FIX = (
    "no token cap was sent (the paper's protocol), so the model may still be generating: try --max-tokens 64, or a "
    "longer --timeout"
)
CHECK_REQUEST = ChatRequest(
    messages=(
        Message(role="system", content="You reply with a single JSON object and nothing else."),
        Message(role="user", content='Reply with {"ok": true}.'),
    ),
    temperature=0.1,
    json_mode=True,
)


def build_model(
    spec: str | ModelSpec,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_retries: int = DEFAULT_MAX_RETRIES,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    cache: bool | Path | str = True,
    retry: RetryPolicy | None = None,
    data: Path | str | None = None,
    perturb: int = 0,
    prompt_cache: bool = True,
) -> ChatModel:
    """The model a run talks to. `cache`: True for the default cache file, a path for another, False for none.

    `retry` replaces the default backoff (then `max_retries` is ignored); replays and the oracle are never cached.
    `data` is the benchmark directory the oracle recognises its cases in (default: the usual data lookup), and
    `perturb` the perturbation seed of the run, whose mapping the oracle's answers go through. `prompt_cache`: mark
    the shared prefix for the provider's prompt cache where the API asks for markers (Anthropic).
    """
    parsed = spec if isinstance(spec, ModelSpec) else parse_model_spec(spec)
    if not parsed.remote and (base_url or api_key_env):
        raise UsageError(
            f"--base-url and --api-key-env apply to a provider's models (openai:<model>, ...), not {parsed}"
        )
    model: ChatModel
    if parsed.kind == "replay":
        assert parsed.target is not None
        return ReplayChatModel(parsed.target)
    if parsed.kind in ("oracle", "oracle-wrong"):
        # Imported here: the oracle knows the benchmark, which the rest of the llm layer never needs to.
        from edsb.llm.oracle import OracleChatModel

        return OracleChatModel(data, wrong=parsed.kind == "oracle-wrong", perturb=perturb)
    if parsed.remote:
        assert parsed.target is not None
        options: dict[str, Any] = {
            "base_url": base_url,
            "api_key_env": api_key_env,
            "timeout_s": timeout,
            "retry": retry or RetryPolicy(max_retries=max_retries),
            "max_in_flight": max_in_flight,
            "max_response_bytes": max_response_bytes,
        }
        model = _remote_model(parsed.kind, parsed.target, options, prompt_cache=prompt_cache)
    else:
        # One context per run in flight, up to the cores (each then gets cores / contexts threads).
        model = LocalChatModel(parsed.target, instances=max_in_flight)
    if cache is False:
        return model
    return CachedChatModel(model, ResponseCache(None if cache is True else Path(cache)))


def _remote_model(kind: str, target: str, options: dict[str, Any], *, prompt_cache: bool) -> ChatModel:
    """The client of a provider's API, as the provider names it (`Provider.client`)."""
    return get_provider(kind).client(target, options, prompt_cache=prompt_cache)


def generation_defaults(spec: str | ModelSpec) -> tuple[int | None, int | None]:
    """What a run sends when `--max-tokens` and `--model-seed` are not given: (token cap, base seed), None for
    nothing sent. The reference's settings for the providers (no cap for the OpenAI-compatible hosts, 2,048 tokens for
    Anthropic and Google, no seed); the embedded model's own cap, seeded with the repeat number (base 0); a replay
    what its recorded run sent (its `config.json`), so that its requests hash as recorded."""
    parsed = spec if isinstance(spec, ModelSpec) else parse_model_spec(spec)
    if parsed.remote:
        return get_provider(parsed.kind).max_tokens, None
    if parsed.kind == "local":
        return LOCAL_MAX_TOKENS, 0
    if parsed.kind == "replay":
        assert parsed.target is not None
        try:
            recorded = json.loads((Path(parsed.target).expanduser() / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None, None
        if not isinstance(recorded, dict):
            return None, None
        return _whole(recorded.get("max_tokens")), _whole(recorded.get("model_seed"))
    return None, None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def seed_refused(spec: str | ModelSpec) -> str | None:
    """Why `--model-seed` cannot reach the model (its provider's API has no seed, as Anthropic's); None if it can."""
    parsed = spec if isinstance(spec, ModelSpec) else parse_model_spec(spec)
    provider = get_provider(parsed.kind) if parsed.remote else None
    if provider is None or provider.takes_seed:
        return None
    return f"{parsed} takes no sampling seed ({provider.no_seed()})"


async def check_model_async(
    spec: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    timeout: float = CHECK_TIMEOUT_S,
    retry: RetryPolicy | None = None,
    request: ChatRequest | None = None,
    prompt_cache: bool = True,
) -> dict[str, Any]:
    """One tiny JSON-mode request, never cached: does this model answer at all? `request`: the check's messages
    with the run's generation settings (`edsb check-model` builds it as a run builds its requests); `prompt_cache`
    as the run marks its prompts. `model` is always `spec` as given, answer or not; the name the server gave its
    model is `served_model` (a replay's recorded model, `recorded_model`)."""
    try:
        retry = retry or RetryPolicy(max_retries=2)
        model = build_model(
            spec,
            base_url=base_url,
            api_key_env=api_key_env,
            timeout=timeout,
            cache=False,
            retry=retry,
            prompt_cache=prompt_cache,
        )
    except EdsbError as exc:
        return {"ok": False, "model": spec, "error": str(exc)}
    if isinstance(model, ReplayChatModel):
        return {"ok": True, "model": spec, "recorded_model": model.identity, "recorded_requests": len(model)}
    if parse_model_spec(spec).kind in ("oracle", "oracle-wrong"):
        return {"ok": True, "model": spec, "answers": "built in (benchmark prompts only)"}
    # The embedded model gets a token cap to stay quick; remote models get the benchmark's exact call shape.
    if request is None:
        local = isinstance(model, LocalChatModel)
        request = CHECK_REQUEST.model_copy(update={"max_tokens": 32}) if local else CHECK_REQUEST
    try:
        response = await model.complete(request)
    except TransportError as exc:  # a refused setting, or an uncapped answer that timed out, says what fixes it
        fix = exc.fix or (UNCAPPED_TIMEOUT_FIX if exc.kind == "timeout" and request.max_tokens is None else None)
        return {"ok": False, "model": spec, "error": str(exc), **({"fix": fix} if fix else {})}
    except EdsbError as exc:
        return {"ok": False, "model": spec, "error": str(exc)}
    finally:
        await model.aclose()
    return {
        "ok": True,
        "model": spec,
        "served_model": response.model,
        "latency_s": round(response.latency_s, 3),
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "finish_reason": response.finish_reason,
        "sent": response.sent,
    }


def check_model(
    spec: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    timeout: float = CHECK_TIMEOUT_S,
    retry: RetryPolicy | None = None,
    request: ChatRequest | None = None,
    prompt_cache: bool = True,
) -> dict[str, Any]:
    """`check_model_async` for synchronous callers (the CLI); not for use inside a running event loop."""
    return asyncio.run(check_model_async(spec, base_url, api_key_env, timeout, retry, request, prompt_cache))
