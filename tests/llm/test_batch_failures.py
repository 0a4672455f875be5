"""What a batch could not answer, classed as the synchronous client classes the same refusal: a prompt the provider
blames is the model's `request_rejected` (final), a refused setting stops the sweep (final), a server error or rate
limit is sent again."""

from __future__ import annotations

import json

from edsb.llm.batch import BatchFailure
from tests.support.provider_fakes import CONTEXT_TOO_LONG


def test_a_prompt_over_the_context_window_is_the_models_and_final() -> None:
    failure = BatchFailure.of_status(400, CONTEXT_TOO_LONG.body)
    assert failure.final and failure.to_error().request_rejected


def test_a_refused_setting_says_what_to_change() -> None:
    body = {"error": {"message": "Unsupported value: 'temperature' does not support 0.1 with this model. Only the "
                      "default (1) value is supported.", "type": "invalid_request_error", "param": "temperature",
                      "code": "unsupported_value"}}  # fmt: skip
    failure = BatchFailure.of_status(400, json.dumps(body).encode())
    assert failure.final and failure.to_error().setting_refused


def test_server_errors_and_rate_limits_are_sent_again() -> None:
    for status in (429, 500, 529):
        failure = BatchFailure.of_status(status, b'{"error": {"message": "try later"}}')
        assert failure.kind == "failed" and not failure.final
        assert not failure.to_error().request_rejected and not failure.to_error().setting_refused
