"""What Amazon Bedrock and Vertex AI check of a request before the model sees it, for the loopback server
(`OpenAIServer(validator=CloudRules(...))`): the cloud's authentication and its form of the Messages API, then the
API's own rules (`provider_rules`).

- Bedrock's InvokeModel (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html):
  `POST /model/{modelId}/invoke`, signed with Signature Version 4 for the service `bedrock`
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html: an `Authorization`
  header `AWS4-HMAC-SHA256 Credential=<key id>/<yyyymmdd>/<region>/bedrock/aws4_request, SignedHeaders=...,
  Signature=<64 hex digits>` and an `X-Amz-Date` header), or a bearer Bedrock API key
  (https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html). Claude's body carries
  `anthropic_version` and no `model` (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html).
  A request that fails authentication gets 403 `{"message": ...}`.
- Claude on Vertex AI (https://docs.claude.com/en/api/claude-on-vertex-ai):
  `POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict`, a bearer access
  token, `anthropic_version` in the body and the model only in the path.
- Gemini on Vertex AI (https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/projects.locations.publishers.models/generateContent):
  `POST /v1beta1/projects/{project}/locations/{region}/publishers/google/models/{model}:generateContent` with a bearer
  access token. Google refuses a missing or wrong token with 401 `UNAUTHENTICATED`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from tests.support.openai_server import (
    ACCESS_TOKEN,
    ANTHROPIC_CLOUD_PATH,
    Dialect,
    RecordedRequest,
    Reply,
)
from tests.support.provider_fakes import provider_rules

SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/(?P<service>[a-z-]+)"
    r"/aws4_request,"
    r" SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=[0-9a-f]{64}"
)
VERTEX_PROJECT = "edsb-loopback"


@dataclass(frozen=True)
class CloudRules:
    """Refuses what the cloud refuses: a request not signed by `aws_key_id` in `region` (Bedrock), or without the
    bearer `token` (Vertex AI, Bedrock API keys); then the API's own rules."""

    region: str
    aws_key_id: str | None = None
    token: str = ACCESS_TOKEN

    def __call__(self, request: RecordedRequest, dialect: Dialect) -> Reply | None:
        authorization = request.headers.get("authorization", "")
        match = ANTHROPIC_CLOUD_PATH.fullmatch(request.path)
        if match is not None and match["bedrock"] is not None:
            refusal = self._bedrock(authorization, request.headers.get("x-amz-date", ""))
        elif authorization != f"Bearer {self.token}":
            message = "Request had invalid authentication credentials. Expected OAuth 2 access token."
            refusal = Reply.json({"error": {"code": 401, "message": message, "status": "UNAUTHENTICATED"}}, status=401)
        else:
            refusal = None
        if refusal is None and match is not None:
            body = request.json()
            if "anthropic_version" not in body or "model" in body:
                refusal = Reply.json(
                    {"message": "anthropic_version is required; the model goes in the path"}, status=400
                )
            # The Messages API's own rules, on the request as the Messages API takes it: the version as its header,
            # the model in the body.
            headers = {**request.headers, "anthropic-version": str(body.pop("anthropic_version", None))}
            body["model"] = match["bedrock"] or match["vertex"]
            request = replace(request, headers=headers, body=json.dumps(body).encode())
        return refusal or provider_rules(request, dialect)

    def _bedrock(self, authorization: str, amz_date: str) -> Reply | None:
        if self.aws_key_id is None:
            good = authorization == f"Bearer {self.token}"
        else:
            sig = SIGV4.fullmatch(authorization)
            good = (
                sig is not None
                and (sig["key"], sig["region"], sig["service"]) == (self.aws_key_id, self.region, "bedrock")
                and {"host", "x-amz-date"} <= set(sig["signed"].split(";"))
                and amz_date.startswith(sig["date"])
            )
        if good:
            return None
        message = "The security token included in the request is invalid."
        return Reply.json({"message": message}, status=403, headers={"x-amzn-ErrorType": "UnrecognizedClientException"})
