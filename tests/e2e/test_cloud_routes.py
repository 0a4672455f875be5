"""Claude on Amazon Bedrock and on Vertex AI, Gemini on Vertex AI, through the official SDKs' cloud clients, against
loopback fakes that check what the cloud checks (tests/support/cloud_fakes.py): the command in docs/models.md runs
`check-model` and a two-case sweep, the request is the direct API's, signed or authorised as the cloud wants, and
the record names the route. A missing region, project or credential is one line before any request."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.cloud_fakes import SIGV4, VERTEX_PROJECT, CloudRules
from tests.support.edsb_cli import Outcome, edsb_in_process, isolate_environment
from tests.support.openai_server import ACCESS_TOKEN, OpenAIServer

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")
pytest.importorskip("boto3")
TWO_RUNS = ("--cases", "13,21", "--distraction", "0", "--no-cache", "--max-retries", "0", "--quiet")
AWS_KEY_ID = "AKIDLOOPBACKEXAMPLE"
CLOUD_VARIABLES = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
    "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL", "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_PROJECT_ID", "ANTHROPIC_VERTEX_BASE_URL", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_VERTEX_BASE_URL", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GENAI_USE_VERTEXAI", "GEMINI_API_KEY",
)  # fmt: skip


@dataclass(frozen=True)
class Route:
    model: str
    region: str
    path: str  # the path every request must take, `{model}` for the model
    env: dict[str, str] = field(default_factory=dict)  # `{root}`: the server's address
    options: tuple[str, ...] = ()


ROUTES = {
    "claude on bedrock, aws keys": Route(
        "anthropic-bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us-east-1",
        "/model/{model}/invoke",
        {
            "AWS_ACCESS_KEY_ID": AWS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": "loopback-secret",
            "AWS_REGION": "us-east-1",
            "ANTHROPIC_BEDROCK_BASE_URL": "{root}",
        },
    ),
    "claude on vertex, an access token": Route(
        "anthropic-vertex:claude-sonnet-4-5@20250929",
        "us-east5",
        f"/v1/projects/{VERTEX_PROJECT}/locations/us-east5/publishers/anthropic/models/{{model}}:rawPredict",
        {"CLOUD_ML_REGION": "us-east5", "ANTHROPIC_VERTEX_PROJECT_ID": VERTEX_PROJECT, "VERTEX_TOKEN": ACCESS_TOKEN},
        ("--base-url", "{root}/v1", "--api-key-env", "VERTEX_TOKEN"),
    ),
    "gemini on vertex, an access token": Route(
        "google-vertex:gemini-2.5-pro",
        "us-central1",
        f"/v1beta1/projects/{VERTEX_PROJECT}/locations/us-central1/publishers/google/models/{{model}}:generateContent",
        {
            "GOOGLE_CLOUD_LOCATION": "us-central1",
            "GOOGLE_CLOUD_PROJECT": VERTEX_PROJECT,
            "VERTEX_TOKEN": ACCESS_TOKEN,
            "GOOGLE_VERTEX_BASE_URL": "{root}",
            "GOOGLE_GENAI_USE_VERTEXAI": "false",
        },
        ("--api-key-env", "VERTEX_TOKEN"),
    ),
}


@pytest.fixture
def edsb_without_cloud_setup(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Callable[..., Outcome]]:
    isolate_environment(monkeypatch, tmp_path / "cache")
    for name in CLOUD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # Nothing from the machine: no AWS files, no gcloud configuration, no metadata server.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.chdir(tmp_path)
    yield lambda *args: edsb_in_process(args, capsys)


@pytest.mark.parametrize("route", ROUTES.values(), ids=ROUTES.keys())
def test_each_cloud_route_runs_with_its_command(
    edsb_without_cloud_setup: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, route: Route
) -> None:
    bedrock = route.model.startswith("anthropic-bedrock:")
    with OpenAIServer(validator=CloudRules(route.region, AWS_KEY_ID if bedrock else None)) as server:
        for name, value in route.env.items():
            monkeypatch.setenv(name, value.format(root=server.root_url))
        options = [option.format(root=server.root_url) for option in route.options]
        check = edsb_without_cloud_setup("check-model", "--model", route.model, *options)
        run = edsb_without_cloud_setup("run", "--model", route.model, *options, *TWO_RUNS, "--out", "out")
        requests = server.requests
    assert check.returncode == 0, check.stderr
    assert run.returncode == 0, run.stderr
    model = route.model.partition(":")[2]
    assert len(requests) > 2 and {request.path for request in requests} == {route.path.format(model=model)}
    if bedrock:
        assert all(SIGV4.fullmatch(request.headers["authorization"]) for request in requests)
    else:
        assert {request.headers["authorization"] for request in requests} == {f"Bearer {ACCESS_TOKEN}"}
    config = json.loads(Path("out/config.json").read_text())
    assert config["model"] == route.model  # the route, as the command named it
    results = [json.loads(line) for line in Path("out/results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(result["status"] != "incomplete" for result in results)


MISSING = {
    "bedrock, no region": ("anthropic-bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0", {}, "AWS_REGION is not set"),
    "bedrock, no credentials": (
        "anthropic-bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0",
        {"AWS_REGION": "us-east-1"},
        "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    ),
    "claude on vertex, no project": (
        "anthropic-vertex:claude-sonnet-4-5@20250929",
        {"CLOUD_ML_REGION": "us-east5"},
        "ANTHROPIC_VERTEX_PROJECT_ID is not set",
    ),
    "gemini on vertex, no credentials": (
        "google-vertex:gemini-2.5-pro",
        {"GOOGLE_CLOUD_LOCATION": "us-central1", "GOOGLE_CLOUD_PROJECT": VERTEX_PROJECT},
        "gcloud auth application-default login",
    ),
}


@pytest.mark.parametrize(("model", "env", "says"), MISSING.values(), ids=MISSING.keys())
def test_a_missing_credential_is_one_line_before_any_request(
    edsb_without_cloud_setup: Callable[..., Outcome],
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    env: dict[str, str],
    says: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with OpenAIServer() as server:
        run = edsb_without_cloud_setup(
            "run", "--model", model, "--base-url", server.root_url, *TWO_RUNS, "--out", "out"
        )
        sent = len(server.requests)
    errors = [
        line for line in run.stderr.splitlines() if not line.startswith("note: ")
    ]  # Claude's note of no temperature
    assert run.returncode == 2 and errors == [errors[0]] and errors[0].startswith("edsb: error: ") and says in errors[0]
    assert sent == 0


@pytest.mark.parametrize("model", ["anthropic-vertex:claude-sonnet-4-5@20250929", "google-vertex:gemini-2.5-pro"])
def test_vertex_takes_the_application_default_credentials_and_says_when_they_fail(
    edsb_without_cloud_setup: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model: str
) -> None:
    """Without a token, the credentials file `gcloud auth application-default login` writes is found and refreshed
    when the first request goes; a refresh that fails (here, Google's token endpoint out of reach, as google-auth
    always sends a user's refresh there) stops the sweep in one line, nothing scored."""
    info = {"type": "authorized_user", "client_id": "loopback", "client_secret": "s", "refresh_token": "r"}
    (tmp_path / "adc.json").write_text(json.dumps(info))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "adc.json"))
    for name in ("CLOUD_ML_REGION", "GOOGLE_CLOUD_LOCATION"):
        monkeypatch.setenv(name, "us-east5")
    for name in ("ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.setenv(name, VERTEX_PROJECT)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens: the refresh cannot leave the host
    with OpenAIServer() as server:
        run = edsb_without_cloud_setup(
            "run", "--model", model, "--base-url", server.root_url, *TWO_RUNS, "--out", "out"
        )
        sent = len(server.requests)
    errors = [line for line in run.stderr.splitlines() if not line.startswith("note: ")]
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "Google's credentials could not be refreshed" in errors[0]
    assert sent == 0 and not Path("out/results.jsonl").read_text()
