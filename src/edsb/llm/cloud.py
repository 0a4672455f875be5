"""Claude on Amazon Bedrock and on Vertex AI, Gemini on Vertex AI: the official SDKs' cloud clients under the cloud's
own credentials. The requests are those of the direct APIs (`sdk_client` builds them); only the client differs.

- `anthropic-bedrock:<model id>`: `anthropic.AsyncAnthropicBedrock`, SigV4-signed with the AWS credentials boto3
  finds (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE`, ...) in `AWS_REGION`; or a Bedrock API key
  (`AWS_BEARER_TOKEN_BEDROCK`) as a bearer token.
- `anthropic-vertex:<model>`: `anthropic.AsyncAnthropicVertex` in `CLOUD_ML_REGION` and `ANTHROPIC_VERTEX_PROJECT_ID`.
- `google-vertex:<model>`: google-genai's `Client(vertexai=True)` in `GOOGLE_CLOUD_LOCATION` and `GOOGLE_CLOUD_PROJECT`
  (whatever `GOOGLE_GENAI_USE_VERTEXAI` says: the route is the spec's).

Both Vertex routes take Google's application default credentials, or an access token from the variable
`--api-key-env` names (`gcloud auth print-access-token`). Everything a route needs is looked up when the model is
built, before any request: a missing region, project or credential is one line naming what to set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from edsb.llm.errors import ApiKeyError, ProviderSdkError
from edsb.llm.providers import Provider
from edsb.llm.refusals import ServerError
from edsb.llm.retry import AttemptFailure

# The scope Vertex AI's access tokens need (https://cloud.google.com/vertex-ai/docs/authentication).
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
ADC_FIX = (
    "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS to a credentials file, or name "
    "a variable holding an access token with --api-key-env"
)
AWS_FIX = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK"
)


@dataclass(frozen=True)
class Place:
    """Where a cloud route sends its requests: region, project (Vertex AI) and the endpoint's address."""

    region: str
    project: str | None
    default_url: str


def place(provider: Provider) -> Place:
    """The route's region and project from the environment, and the endpoint the SDK would address there."""
    assert provider.cloud is not None and provider.region_env is not None
    region = _env(provider.region_env)
    if provider.cloud == "bedrock":
        region = region or _env("AWS_DEFAULT_REGION") or _boto_region()
        if not region:
            raise ApiKeyError(f"{provider.region_env} is not set: export the AWS region of the model (e.g. us-east-1)")
        return Place(region, None, f"https://bedrock-runtime.{region}.amazonaws.com")
    if not region:
        raise ApiKeyError(f"{provider.region_env} is not set: export the Vertex AI region (e.g. us-east5, or global)")
    project = _env(provider.project_env or "")
    if not project:
        raise ApiKeyError(f"{provider.project_env} is not set: export the id of your Google Cloud project")
    host = "aiplatform.googleapis.com" if region == "global" else f"{region}-aiplatform.googleapis.com"
    # Anthropic's Vertex client takes the address with its API version; google-genai adds its own.
    return Place(region, project, f"https://{host}/v1" if provider.api == "anthropic" else f"https://{host}")


def override_url(provider: Provider) -> str | None:
    """The address the route's variable names instead of the cloud's (a proxy, a private endpoint, a test)."""
    return _env(provider.base_url_env or "") or None


def _env(name: str) -> str:
    return os.environ.get(name, "").strip() if name else ""


def _boto_region() -> str:
    """The region of the AWS profile in use, as boto3 reads `~/.aws/config`."""
    return str(_boto3(None).Session().region_name or "")


def _boto3(provider: Provider | None) -> Any:
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError:
        raise ProviderSdkError("anthropic-bedrock: models need boto3: pip install 'edsb[bedrock]'") from None
    return boto3


def check_aws_credentials(provider: Provider, region: str) -> None:
    """An error now, not at the first request, when boto3 finds no AWS credentials to sign with."""
    if _boto3(provider).Session(region_name=region).get_credentials() is None:
        raise ApiKeyError(f"no AWS credentials found for {provider.name}: {AWS_FIX}")


def google_credentials(provider: Provider, token: str | None) -> Any:
    """The access token given, as credentials; else Google's application default credentials (not yet refreshed:
    the SDK refreshes them when it first sends)."""
    try:
        import google.auth
        from google.oauth2.credentials import Credentials
    except ImportError:
        raise ProviderSdkError(f"{provider.name}: models need google-auth: pip install 'edsb[vertex]'") from None
    if token is not None:
        return Credentials(token=token)
    try:
        credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    except google.auth.exceptions.DefaultCredentialsError:
        raise ApiKeyError(f"no Google application default credentials found for {provider.name}: {ADC_FIX}") from None
    return credentials


def anthropic_client(sdk: Any, provider: Provider, where: Place, url: str, http: Any, secret: Any) -> Any:
    """The SDK's Bedrock or Vertex client (its own retries off): `secret` is the Bedrock API key or None (AWS
    credentials), or Vertex AI's credentials."""
    if provider.cloud == "bedrock":
        return sdk.AsyncAnthropicBedrock(
            aws_region=where.region, api_key=secret, base_url=url, http_client=http, max_retries=0
        )
    return sdk.AsyncAnthropicVertex(
        region=where.region,
        project_id=where.project,
        credentials=secret,
        base_url=url,
        http_client=http,
        max_retries=0,
    )


def genai_client(genai: Any, where: Place, url: str, http: Any, credentials: Any) -> Any:
    """google-genai's Vertex AI client (its own retries off)."""
    types = genai.types
    options = types.HttpOptions(base_url=url, httpx_async_client=http, retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(
        vertexai=True, project=where.project, location=where.region, credentials=credentials, http_options=options
    )


def credential_failure(exc: BaseException) -> AttemptFailure | None:
    """Google's credentials that could not be refreshed (revoked, or the token endpoint out of reach) as the 401
    they amount to: the sweep stops with the reason, nothing scored."""
    try:
        from google.auth.exceptions import GoogleAuthError
    except ImportError:
        return None
    cause: BaseException | None = exc
    for _ in range(8):  # the SDK may wrap it
        if cause is None or isinstance(cause, GoogleAuthError):
            break
        cause = cause.__cause__ or cause.__context__
    if cause is None or not isinstance(cause, GoogleAuthError):
        return None
    exc = cause
    message = f"Google's credentials could not be refreshed: {exc}; {ADC_FIX}"
    return AttemptFailure.http(401, ServerError(" ".join(message.split())), None)
