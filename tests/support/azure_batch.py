"""A loopback fake of Azure OpenAI's Batch API on a classic resource endpoint, as the `openai` SDK's
`AsyncAzureOpenAI` calls it:

    with AzureBatchServer(handler, deployments={"eval-4o"}) as server:
        ... AZURE_OPENAI_ENDPOINT (or --base-url) = server.root_url ...

It is `OpenAIBatchServer` (tests/support/openai_batch.py) behind Azure's addresses and rules, as Azure describes them
(https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/batch, and the data plane's authoring reference,
https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference):
- every call goes under `/openai/` on the resource endpoint (`/openai/files`, `/openai/batches`,
  `/openai/files/<id>/content`), carries the `api-version` query and the key in the `api-key` header; without them
  it is refused (400, 401), as the synchronous deployment URL refuses it;
- an input line's `url` is `/chat/completions` (no version in the path) and its body's `model` names the
  *deployment*, not a model; a batch created over another endpoint, or a line naming a deployment the resource does
  not have, is refused (400: `deployment_not_found`, in the batch's error file for the line);
- the synchronous deployment URL, `/openai/deployments/<deployment>/chat/completions`, serves check-model's probe and
  a synchronous pass (`sync`), as the plain fake does.

`calls` records (method, path, query, api-key) of every call, for a test to see the addresses used.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.support.openai_batch import Handler, OpenAIBatchServer, _BatchHandler
from tests.support.openai_server import AZURE_PATH, CHAT_PATH, Reply

AZURE_CHAT = "/chat/completions"


class AzureBatchServer(OpenAIBatchServer):
    def __init__(self, handler: Handler, *, deployments: set[str], probe: Reply | None = None) -> None:
        super().__init__(handler, probe=probe, line_reply=self._deployment_refusal)
        self.deployments = deployments
        self.calls: list[tuple[str, str, str, str | None]] = []
        self._calls_lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self.root_url  # Azure's resource endpoint: the SDK adds `/openai`

    def _deployment_refusal(self, line: dict[str, Any]) -> Reply | None:
        if line["url"] != AZURE_CHAT or line["body"].get("model") not in self.deployments:
            error = {"code": "deployment_not_found", "message": f"no deployment {line['body'].get('model')!r}"}
            return Reply.json({"error": error}, status=400)
        return None

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("endpoint") != AZURE_CHAT:
            raise ValueError(f"endpoint {body.get('endpoint')!r} is not served here")
        return super().create(body)


class _AzureBatchHandler(_BatchHandler):
    server_owner: AzureBatchServer

    def _azure_path(self) -> str | None:
        """The plain fake's path for this Azure call, after Azure's checks (None: refused, already answered)."""
        path, _, query = self.path.partition("?")
        with self.server_owner._calls_lock:
            self.server_owner.calls.append((self.command, path, query, self.headers.get("api-key")))
        if "api-version=" not in query:
            missing = "Missing required query parameter: api-version"
            self._json({"error": {"code": "BadRequest", "message": missing}}, 400)
            return None
        if not self.headers.get("api-key"):
            message = "Access denied due to invalid subscription key or wrong API endpoint."
            self._json({"error": {"code": "401", "message": message}}, 401)
            return None
        deployment = AZURE_PATH.fullmatch(path)
        if deployment is not None:
            return CHAT_PATH if deployment["deployment"] in self.server_owner.deployments else "/unknown-deployment"
        if path.startswith("/openai/"):
            return "/v1/" + path.removeprefix("/openai/")
        return "/unknown"

    def do_POST(self) -> None:
        path = self._azure_path()
        if path is None:
            self._body()
            return
        self.path = path
        if path == "/v1/batches":  # the endpoint checked here, refused as Azure refuses it
            body = self._body()
            try:
                self._json(self.server_owner.create(json.loads(body)))
            except ValueError as exc:
                self._json({"error": {"code": "invalid_request", "message": str(exc)}}, 400)
            return
        super().do_POST()

    def do_GET(self) -> None:
        path = self._azure_path()
        if path is not None:
            self.path = path
            super().do_GET()


AzureBatchServer.handler_class = _AzureBatchHandler
