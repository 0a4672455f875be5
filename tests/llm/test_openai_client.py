"""The OpenAI-compatible client against a real HTTP server on loopback, faults included."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import threading
import time
import warnings

import pytest

from edsb.llm import ApiKeyError, ChatRequest, OpenAIChatModel, RetryPolicy, TransportError
from edsb.llm.remote import server_timeout
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply, completion_payload

FAST_RETRIES = RetryPolicy(max_retries=2, initial_delay_s=0.01, max_delay_s=5.0, jitter=0.0)
KEY = "sk-test-not-a-real-key"


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDSB_TEST_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def make_model(server: OpenAIServer, **overrides: object) -> OpenAIChatModel:
    settings: dict[str, object] = {"api_key_env": "EDSB_TEST_KEY", "timeout_s": 5.0, "retry": FAST_RETRIES}
    settings.update(overrides)
    return OpenAIChatModel("gpt-test", base_url=server.base_url, **settings)  # type: ignore[arg-type]


def request(json_mode: bool = True, **settings: object) -> ChatRequest:
    messages = [dict(role="system", content="Answer briefly."), dict(role="user", content="Where does Ryan stand?")]
    return ChatRequest(messages=messages, temperature=0.1, json_mode=json_mode, **settings)  # type: ignore[arg-type]


def complete(model: OpenAIChatModel, chat_request: ChatRequest | None = None):
    async def run():
        try:
            return await model.complete(chat_request or request())
        finally:
            await model.aclose()

    return asyncio.run(run())


def test_request_shape_and_usage(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(
        Reply.completion('{"plan": {}}', prompt_tokens=321, completion_tokens=17, model="gpt-test-2024-01-01")
    )
    response = complete(make_model(openai_server))

    [sent] = openai_server.chat_requests
    body = sent.json()
    assert body["model"] == "gpt-test"
    assert body["messages"] == [
        dict(role="system", content="Answer briefly."),
        dict(role="user", content="Where does Ryan stand?"),
    ]
    assert body["temperature"] == 0.1
    assert body["response_format"] == {"type": "json_object"}
    assert not {"max_tokens", "seed", "stop", "tools", "top_p"} & body.keys()
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert (response.text, response.prompt_tokens, response.completion_tokens) == ('{"plan": {}}', 321, 17)
    assert response.model == "gpt-test-2024-01-01"
    assert response.finish_reason == "stop"
    assert response.attempts == 1
    assert response.source == "model"
    assert response.latency_s > 0


def test_text_mode_sends_no_response_format_and_optional_settings_only_when_set(openai_server: OpenAIServer) -> None:
    complete(make_model(openai_server), request(json_mode=False, max_tokens=64, seed=7))
    body = openai_server.chat_requests[0].json()
    assert "response_format" not in body
    assert (body["max_tokens"], body["seed"]) == (64, 7)


def test_missing_usage_and_model_fall_back(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.json({"choices": [{"message": {"role": "assistant", "content": "hi"}}]}))
    response = complete(make_model(openai_server))
    assert (response.text, response.prompt_tokens, response.completion_tokens) == ("hi", 0, 0)
    assert response.model == "gpt-test"
    assert response.finish_reason is None


@pytest.mark.parametrize("value", ["lots", 1e400, [1], -1, True, 2.5, {"n": 1}], ids=repr)
def test_a_usage_field_that_is_no_count_is_an_invalid_response_and_retried(
    openai_server: OpenAIServer, value: object
) -> None:
    """`int()` of these raised (ValueError, OverflowError for the infinity 1e400 parses to, TypeError) and the run
    was recorded as edsb's own fault; they are a body that is no completion, asked for again like any other."""
    payload = completion_payload("hi", 3, 1, "stop", "gpt-test")
    payload["usage"]["prompt_tokens"] = value
    body = json.dumps(payload).replace("Infinity", "1e400").encode()  # as the server wrote it, not Python's token
    bad = Reply(200, body, {"Content-Type": "application/json"})
    openai_server.enqueue(bad, bad)
    with pytest.raises(TransportError) as caught:
        complete(make_model(openai_server, retry=RetryPolicy(max_retries=1, initial_delay_s=0.01)))
    assert (caught.value.kind, caught.value.attempts) == ("invalid_response", 2)
    assert "usage.prompt_tokens is not a token count" in str(caught.value)
    openai_server.enqueue(bad, Reply.completion("second time", prompt_tokens=7))
    response = complete(make_model(openai_server))
    assert (response.text, response.prompt_tokens, response.attempts) == ("second time", 7, 2)


def test_whole_numbers_and_null_are_token_counts(openai_server: OpenAIServer) -> None:
    payload = completion_payload("hi", 3, 1, "stop", "gpt-test")
    payload["usage"].update(prompt_tokens=12.0, completion_tokens=None)
    openai_server.enqueue(Reply.json(payload))
    response = complete(make_model(openai_server))
    assert (response.prompt_tokens, response.completion_tokens) == (12, 0)


def test_bad_model_output_is_still_a_completion(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.completion(None, finish_reason="length"))
    response = complete(make_model(openai_server))
    assert (response.text, response.finish_reason) == ("", "length")


def test_a_lone_surrogate_escape_in_the_body_is_a_completion_with_the_text_repaired(
    openai_server: OpenAIServer,
) -> None:
    """JSON may spell a lone surrogate (`\ud800` as an escape); pydantic-core refuses it, so the body used to be an
    invalid response, retried and never scored. It is the model's text: repaired where it enters edsb, and noted."""
    payload = completion_payload("MARK", 5, 3, "stop", "gpt-test")
    body = json.dumps(payload).replace("MARK", "\\ud800x").encode()
    assert b'"\\ud800x"' in body  # one JSON escape of a lone surrogate
    openai_server.enqueue(Reply(body=body, headers={"Content-Type": "application/json"}))
    response = complete(make_model(openai_server))
    assert (response.text, response.surrogates_replaced) == ("\ufffdx", True)
    assert len(openai_server.chat_requests) == 1  # not retried


def test_429_retry_after_is_honoured(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.rate_limited(retry_after="1"), Reply.completion("late"))
    response = complete(make_model(openai_server))
    first, second = openai_server.chat_requests
    assert response.text == "late"
    assert response.attempts == 2
    assert second.received_at - first.received_at >= 0.9  # backoff alone would have waited 0.01 s


def test_retry_after_ms_is_honoured(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.rate_limited(retry_after_ms="300"), Reply.completion("ok"))
    complete(make_model(openai_server))
    first, second = openai_server.chat_requests
    assert second.received_at - first.received_at >= 0.28  # it waited at least as long as it was told


def test_5xx_is_retried_with_backoff(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.error(500), Reply.error(503), Reply.completion("third time"))
    response = complete(make_model(openai_server))
    assert (response.text, response.attempts) == ("third time", 3)
    assert len(openai_server.chat_requests) == 3


def test_exhausted_retries_raise_transport_error(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(*[Reply.error(502, "bad gateway")] * 3)
    with pytest.raises(TransportError) as caught:
        complete(make_model(openai_server))
    error = caught.value
    assert (error.kind, error.status, error.attempts) == ("http", 502, 3)
    assert "bad gateway" in str(error)
    assert len(openai_server.chat_requests) == 3


def test_client_errors_are_not_retried(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.error(400, "response_format is not supported"))
    with pytest.raises(TransportError) as caught:
        complete(make_model(openai_server))
    assert (caught.value.kind, caught.value.status, caught.value.attempts) == ("http", 400, 1)
    assert "response_format is not supported" in caught.value.message
    assert len(openai_server.chat_requests) == 1


def test_echoed_key_is_redacted_and_404_explained(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.error(401, f"Incorrect API key provided: {KEY}"), Reply.error(404, "no such route"))
    with pytest.raises(TransportError) as unauthorised:
        complete(make_model(openai_server))
    assert KEY not in str(unauthorised.value)
    assert "Incorrect API key provided: ***" in str(unauthorised.value)
    with pytest.raises(TransportError, match="does --base-url end in /v1"):
        complete(make_model(openai_server))


def test_hanging_response_times_out(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.hang(), Reply.hang())
    with pytest.raises(TransportError) as caught:
        complete(make_model(openai_server, timeout_s=0.3, retry=RetryPolicy(max_retries=1, initial_delay_s=0.01)))
    assert (caught.value.kind, caught.value.attempts) == ("timeout", 2)
    assert len(openai_server.chat_requests) == 2  # one try and one retry, then it gave up


def test_slow_but_timely_response_succeeds(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.completion("patient", delay_s=0.2))
    response = complete(make_model(openai_server, timeout_s=2.0))
    assert response.text == "patient"
    assert response.latency_s >= 0.2


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply.text("<html>502 Bad Gateway</html>"), "invalid_response"),
        (Reply.empty_choices(), "invalid_response"),
        (Reply.reset(), "connection"),
        (Reply.truncated(), "connection"),
    ],
    ids=["non-json-200", "empty-choices", "connection-reset", "truncated-body"],
)
def test_broken_responses_are_transport_errors(openai_server: OpenAIServer, reply: Reply, kind: str) -> None:
    openai_server.enqueue(reply, reply)
    with pytest.raises(TransportError) as caught:
        complete(make_model(openai_server, retry=RetryPolicy(max_retries=1, initial_delay_s=0.01)))
    assert (caught.value.kind, caught.value.attempts) == (kind, 2)
    assert len(openai_server.chat_requests) == 2


def test_non_json_body_is_named_in_the_error(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.text("upstream exploded"))
    with pytest.raises(TransportError, match="upstream exploded"):
        complete(make_model(openai_server, retry=RetryPolicy(max_retries=0)))


def test_recovers_after_a_connection_reset(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.reset(), Reply.completion("back"))
    assert complete(make_model(openai_server)).text == "back"


def test_refused_connection_is_a_transport_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIChatModel(
        "gpt-test", base_url=f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(max_retries=1, initial_delay_s=0.01)
    )
    with pytest.raises(TransportError) as caught:
        complete(model)
    assert (caught.value.kind, caught.value.attempts) == ("unreachable", 2)


def test_requests_in_flight_are_limited() -> None:
    """The server holds each request until as many as the limit are open at once (or only the last is left), so
    the client always has one waiting while it could send another: the number open reaches the limit, never more."""
    opened = threading.Condition()
    state = {"now": 0, "peak": 0, "answered": 0}

    def held(request: RecordedRequest) -> Reply:
        with opened:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            opened.notify_all()
            opened.wait_for(lambda: state["now"] >= 2 or state["answered"] == 5, timeout=20)  # a hang guard only
            state["now"] -= 1
            state["answered"] += 1
            opened.notify_all()
        return Reply.completion("done")

    with OpenAIServer(held) as server:
        model = make_model(server, max_in_flight=2)

        async def run() -> list[str]:
            try:
                answers = await asyncio.gather(*(model.complete(request(sample_index=i)) for i in range(6)))
            finally:
                await model.aclose()
            return [answer.text for answer in answers]

        assert asyncio.run(run()) == ["done"] * 6
    assert state["peak"] == 2


def test_every_slot_of_a_high_concurrency_is_on_the_wire_at_once() -> None:
    """Every admitted request is on the wire at once: the pool holds a connection for each, beyond the default
    caps of HTTP libraries (aiohttp's 100 per session, the SDK's 100 kept alive)."""
    slots = 103
    waves = [threading.Event(), threading.Event()]
    arrivals = [0]
    lock = threading.Lock()

    def answer_when_all_are_open(recorded: RecordedRequest) -> Reply:
        # A wave is answered once all its requests are open (a hang guard aside), so the number open at once is a
        # property of the client's pool, not of how fast this machine is.
        with lock:
            wave = waves[arrivals[0] // slots]
            arrivals[0] += 1
            if arrivals[0] % slots == 0:
                wave.set()
        wave.wait(timeout=20)
        return Reply.completion("done")

    with OpenAIServer(answer_when_all_are_open) as server:
        model = make_model(server, max_in_flight=slots)

        async def run() -> None:
            try:
                for wave in range(2):
                    await asyncio.gather(
                        *(model.complete(request(sample_index=wave * slots + i)) for i in range(slots))
                    )
            finally:
                await model.aclose()

        asyncio.run(run())
        assert server.max_in_flight == slots
        assert len(server.chat_requests) == 2 * slots


def test_model_survives_a_new_event_loop(openai_server: OpenAIServer) -> None:
    model = make_model(openai_server)
    assert asyncio.run(model.complete(request())).text == '{"ok": true}'
    assert complete(model).text == '{"ok": true}'  # the first loop is closed: its client is rebuilt
    with warnings.catch_warnings():  # the abandoned client's socket belonged to the closed loop
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def test_openai_base_url_env_is_used(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url + "/")
    model = OpenAIChatModel("gpt-test", api_key_env="EDSB_TEST_KEY")
    assert model.base_url == openai_server.base_url
    assert complete(model).text == '{"ok": true}'


def test_key_comes_from_openai_api_key_by_default(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default")
    complete(OpenAIChatModel("gpt-test", base_url=openai_server.base_url))
    assert openai_server.chat_requests[0].headers["authorization"] == "Bearer sk-default"


def test_missing_keys_are_user_errors(openai_server: OpenAIServer) -> None:
    with pytest.raises(ApiKeyError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o")  # OpenAI itself, no key anywhere
    with pytest.raises(ApiKeyError, match="NO_SUCH_KEY_VARIABLE"):
        OpenAIChatModel("gpt-test", base_url=openai_server.base_url, api_key_env="NO_SUCH_KEY_VARIABLE")
    # A self-hosted server without a configured key still gets a request (it decides whether it wants one).
    complete(OpenAIChatModel("gpt-test", base_url=openai_server.base_url))
    assert KEY not in openai_server.chat_requests[0].headers["authorization"]


def test_the_key_is_never_shown() -> None:
    model = OpenAIChatModel("gpt-test", base_url="http://127.0.0.1:9/v1", api_key_env="EDSB_TEST_KEY")
    assert KEY not in repr(model)
    assert KEY not in model.identity


def test_proxy_variables_are_honoured_and_no_proxy_exempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests go through `HTTP_PROXY` unless `NO_PROXY` names the host. The proxy here is the test server: it
    records the request in a proxy's absolute form and, routing by path, answers 404."""
    no_retries = {"api_key_env": "EDSB_TEST_KEY", "retry": RetryPolicy(max_retries=0)}
    with OpenAIServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        with pytest.raises(TransportError) as via_proxy:
            complete(OpenAIChatModel("gpt-test", base_url="http://models.invalid/v1", **no_retries))  # type: ignore[arg-type]
        assert (via_proxy.value.kind, via_proxy.value.status) == ("http", 404)
        assert [r.path for r in proxy.requests] == ["http://models.invalid/v1/chat/completions"]
        monkeypatch.setenv("NO_PROXY", "models.invalid")
        with pytest.raises(TransportError) as direct:
            complete(OpenAIChatModel("gpt-test", base_url="http://models.invalid/v1", **no_retries))  # type: ignore[arg-type]
        assert direct.value.kind == "unreachable"  # asked the host itself, which does not exist
        assert len(proxy.requests) == 1


def test_a_reply_that_waited_for_this_process_s_cpu_is_not_a_timeout() -> None:
    """The server answers at once, but this process's event loop is kept busy (as by a sampler holding the GIL, or
    a loaded host) past the request's timeout: the reply is taken, since only the server's time counts. A server
    that never answers still times out (`test_hanging_response_times_out`)."""
    received, blocking, answered = threading.Event(), threading.Event(), threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:  # one request, answered only once the loop is blocked
            connection, _ = listener.accept()
            with connection:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += connection.recv(65536)
                received.set()
                blocking.wait(20)  # a hang guard only
                body = json.dumps(completion_payload('{"ok": true}', 5, 3, "stop", "gpt-test")).encode()
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                connection.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
                answered.set()

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        port = listener.getsockname()[1]
        model = OpenAIChatModel(
            "gpt-test",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key_env="EDSB_TEST_KEY",
            timeout_s=1.0,
            retry=RetryPolicy(max_retries=0),
        )

        async def busy_loop(started: float) -> None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, received.wait, 20)
            blocking.set()  # from here on, nothing else runs on this loop
            answered.wait(20)
            # The loop kept busy past the request's deadline, half a timeout short of the most it may move by.
            time.sleep(max(0.0, started + 1.5 - loop.time()))

        async def run() -> str:
            started = asyncio.get_running_loop().time()
            try:
                reply, _ = await asyncio.gather(model.complete(request()), busy_loop(started))
                return reply.text
            finally:
                await model.aclose()

        assert asyncio.run(run()) == '{"ok": true}'
        server.join(20)


def test_a_busy_loop_moves_a_request_s_deadline_by_the_timeout_at_most() -> None:
    """However late the loop ran, a server that does not answer ends the attempt: the deadline moves by the timeout
    once more at most. The loop is kept busy for five timeouts; an answer that comes just after is past that."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str] = loop.create_future()

        async def busy_loop() -> None:
            await asyncio.sleep(0)  # the timed wait below has begun
            time.sleep(1.5)  # five timeouts during which nothing else runs on this loop
            loop.call_later(0.01, answer.set_result, "too late")

        async def timed() -> str:
            async with server_timeout(0.3):
                return await answer

        results = await asyncio.gather(timed(), busy_loop(), return_exceptions=True)
        assert isinstance(results[0], TimeoutError), results

    asyncio.run(run())
