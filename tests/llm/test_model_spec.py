"""Model specs, the factory's user errors, request hashing and the retry policy's arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from edsb.errors import EdsbError
from edsb.llm import (
    ApiKeyError,
    ChatRequest,
    ModelSpec,
    ModelSpecError,
    RetryPolicy,
    build_model,
    parse_model_spec,
    request_key,
)
from edsb.llm.retry import is_retryable_status, retry_after_s


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("local", ModelSpec("local")),
        ("local:/models/qwen.gguf", ModelSpec("local", "/models/qwen.gguf")),
        ("openai:gpt-4o-2024-08-06", ModelSpec("openai", "gpt-4o-2024-08-06")),
        ("openai:qwen2.5:7b", ModelSpec("openai", "qwen2.5:7b")),  # Ollama tags keep their colon
        ("openai:mistralai/Mistral-7B-Instruct-v0.3", ModelSpec("openai", "mistralai/Mistral-7B-Instruct-v0.3")),
        ("replay:runs/2025-01-01", ModelSpec("replay", "runs/2025-01-01")),
        ("anthropic:claude-sonnet-4-5", ModelSpec("anthropic", "claude-sonnet-4-5")),
        ("google:gemini-2.5-flash", ModelSpec("google", "gemini-2.5-flash")),
        (
            "deepinfra:Qwen/Qwen2.5-72B-Instruct",
            ModelSpec("deepinfra", "Qwen/Qwen2.5-72B-Instruct"),
        ),
        ("groq:mixtral-8x7b-32768", ModelSpec("groq", "mixtral-8x7b-32768")),
        ("cerebras:qwen-3-32b", ModelSpec("cerebras", "qwen-3-32b")),
        ("lepton:qwen2-72b", ModelSpec("lepton", "qwen2-72b")),
    ],
)
def test_specs_parse_and_print_back(text: str, spec: ModelSpec) -> None:
    assert parse_model_spec(text) == spec
    assert str(spec) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpt-4o", "(did you mean 'openai:gpt-4o'?)"),
        ("oracel", "(did you mean 'oracle'?)"),
        ("oracle-wrnog", "(did you mean 'oracle-wrong'?)"),
        ("lcoal", "(did you mean 'local'?)"),
        ("opnai:gpt-4o", "(did you mean 'openai:gpt-4o'?)"),
        ("openai:", "needs a model name"),
        ("replay:", "needs a run directory"),
        ("local:", "names no GGUF file"),
        ("mistrel:large", "did you mean"),
        ("anthropic:", "needs a model name"),
    ],
)
def test_bad_specs_are_one_line_user_errors(text: str, message: str) -> None:
    with pytest.raises(ModelSpecError) as caught:
        parse_model_spec(text)
    assert message in str(caught.value)
    assert isinstance(caught.value, EdsbError)
    assert "\n" not in str(caught.value)


def test_server_options_only_apply_to_openai_models() -> None:
    with pytest.raises(EdsbError, match="--base-url"):
        build_model("local", base_url="http://127.0.0.1:1/v1")


def test_request_key_covers_every_setting() -> None:
    base = ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=0.1)
    variants = [
        base,
        base.model_copy(update={"temperature": 0.2}),
        base.model_copy(update={"json_mode": True}),
        base.model_copy(update={"sample_index": 1}),
        base.model_copy(update={"top_p": 0.5}),
        base.model_copy(update={"seed": 0}),
        base.model_copy(update={"max_tokens": 10}),
    ]
    keys = {request_key("openai:m@http://a", variant) for variant in variants}
    assert len(keys) == len(variants)
    assert request_key("openai:m@http://a", base) != request_key("openai:m@http://b", base)
    rebuilt = ChatRequest.model_validate_json(base.model_dump_json())
    assert request_key("openai:m@http://a", rebuilt) == request_key("openai:m@http://a", base)


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(initial_delay_s=0.5, multiplier=2.0, max_delay_s=3.0, jitter=0.0)
    assert [policy.delay_s(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    jittery = RetryPolicy(initial_delay_s=1.0, jitter=0.25)
    assert all(1.0 <= jittery.delay_s(1) <= 1.25 for _ in range(50))


def test_retry_after_wins_over_backoff_within_the_cap() -> None:
    policy = RetryPolicy(initial_delay_s=0.01, max_delay_s=30.0, jitter=0.0)
    assert policy.delay_s(1, retry_after_s=7.0) == 7.0
    assert policy.delay_s(1, retry_after_s=3600.0) == 30.0


def test_retry_after_header_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s({"Retry-After": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_s({"Retry-After": "Wed, 01 Jan 2025 12:00:05 GMT"}, now=now) == 5.0
    assert retry_after_s({"Retry-After": "soon"}) is None
    assert retry_after_s({}) is None


def test_which_statuses_are_retried() -> None:
    assert [is_retryable_status(s) for s in (400, 401, 404, 408, 409, 429, 500, 502, 503)] == [
        False, False, False, True, True, True, True, True, True,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "variable", "url"),
    [
        ("openai:m", "OPENAI_API_KEY", "https://api.openai.com/v1"),
        (
            "deepinfra:Qwen/Qwen2.5-72B-Instruct",
            "DEEPINFRA_API_TOKEN",
            "https://api.deepinfra.com/v1/openai",
        ),
        ("groq:mixtral-8x7b-32768", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
        ("groq-native:mixtral-8x7b-32768", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
        ("cerebras:qwen-3-32b", "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1"),
        ("lepton:qwen2-72b", "LEPTON_API_TOKEN", "https://qwen2-72b.lepton.run/api/v1"),
    ],
)
def test_openai_compatible_providers_take_the_references_host_and_key_variable(
    spec: str, variable: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", variable):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ApiKeyError, match=f"^{variable} is not set"):
        build_model(spec, cache=False)
    monkeypatch.setenv(variable, "k")
    model = build_model(spec, cache=False)
    provider = spec.partition(":")[0].removesuffix("-native")
    assert model.identity == f"{provider}:{spec.partition(':')[2]}@{url}"
    # --base-url and --api-key-env still override both.
    monkeypatch.setenv("OTHER_KEY", "k2")
    moved = build_model(spec, base_url="http://127.0.0.1:9/v1", api_key_env="OTHER_KEY", cache=False)
    assert moved.identity.endswith("@http://127.0.0.1:9/v1") and moved.identity.startswith(f"{provider}:")


def test_a_missing_sdk_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if the extra were not installed
    with pytest.raises(EdsbError, match=r"pip install 'edsb\[anthropic\]'") as caught:
        build_model("anthropic:claude", cache=False)
    assert "\n" not in str(caught.value)


def test_the_providers_rate_limit_reset_headers_give_the_wait() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    anthropic = {
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2025-01-01T12:00:07Z",
        "anthropic-ratelimit-tokens-remaining": "5000",
        "anthropic-ratelimit-tokens-reset": "2025-01-01T12:00:50Z",  # not exhausted: no reason to wait for it
    }
    assert retry_after_s(anthropic, now) == 7.0
    groq = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m2.5s"}
    assert retry_after_s(groq, now) == 62.5
    openai = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "120ms"}
    assert retry_after_s(openai, now) == 0.12
    cerebras = {"x-ratelimit-remaining-requests-minute": "0", "x-ratelimit-reset-requests-minute": "33.5"}
    assert retry_after_s(cerebras, now) == 33.5
    assert retry_after_s({**groq, "retry-after": "3"}, now) == 3.0  # Retry-After wins
    assert retry_after_s({"x-ratelimit-remaining-tokens": "10", "x-ratelimit-reset-tokens": "9s"}, now) is None
    assert retry_after_s({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "soon"}, now) is None
    for not_a_duration in ("6m0", "1.5.5s", "1" * 8190 + "x"):  # the last: a digit flood, read in linear time
        assert retry_after_s({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": not_a_duration}) is None
