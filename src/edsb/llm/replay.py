"""`replay:<run dir>`: answers from an earlier run's transcripts, matched by the cache's request hash.

A request that was never recorded is a `ReplayError`, never a silent call to a live model: a replay that asks
something new means the code or the data changed since the recording, which is exactly what it is there to show.
A recorded transport failure is raised again, so the replayed run fails the way the original did. A run the
directory never recorded is refused before anything runs (`require_runs`): nothing changed, it was simply not there.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from edsb.llm.errors import ReplayError
from edsb.llm.protocol import ChatRequest, ChatResponse, request_key
from edsb.llm.transcripts import TranscriptRecord, read_transcripts
from edsb.results import RunKey

LISTED = 3  # run ids named in an error before "and N more"


class ReplayChatModel:
    """Takes the identity of the recorded model, so replayed results and hashes match the original run."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory).expanduser()
        if not self.directory.exists():
            raise ReplayError(f"replay directory {self.directory} does not exist")
        records = read_transcripts(self.directory)
        if not records:
            raise ReplayError(f"no transcripts (*.jsonl) under {self.directory}")
        # A run resumed at a moved endpoint records one model under several addresses (`openai:<model>@<url>`).
        identities = sorted({record.model for record in records})
        models = {identity.partition("@")[0] for identity in identities}
        if len(models) > 1:
            raise ReplayError(f"{self.directory} mixes transcripts of several models: {', '.join(identities)}")
        self._identity = identities[0]
        self._identities = identities
        self._runs = {record.run for record in records}  # run keys as file stems (`RunKey.file_stem`)
        self._answers: dict[str, TranscriptRecord] = {}
        for record in records:  # a later success replaces anything earlier; a failure never replaces a success
            key = request_key(record.model, record.request)
            earlier = self._answers.get(key)
            if earlier is None or record.response is not None or earlier.response is None:
                self._answers[key] = record

    def __repr__(self) -> str:
        return f"ReplayChatModel({str(self.directory)!r})"

    def __len__(self) -> int:
        return len(self._answers)

    @property
    def identity(self) -> str:
        return self._identity

    def require_runs(self, keys: Iterable[RunKey]) -> None:
        """Refuse the runs the directory holds no request of, naming them and what it did record: their requests
        were never sent, so no change of code, data or options is to blame."""
        keys = list(keys)
        missing = [key.id for key in keys if key.file_stem not in self._runs]
        if missing:
            recorded = sorted(stem.replace("__", "/", 1) for stem in self._runs)
            are = "is" if len(missing) == 1 else "are"
            raise ReplayError(
                f"{len(missing)} of the {len(keys)} runs asked for {are} not recorded in {self.directory} "
                f"({_listing(missing)}); it holds {_listing(recorded)}: replay the runs it recorded (the same "
                "--variant, --cases, --distraction and --repeats)"
            )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        found = [r for i in self._identities if (r := self._answers.get(request_key(i, request))) is not None]
        record = next((r for r in found if r.response is not None), found[0] if found else None)
        if record is None:
            raise ReplayError(
                f"replay stopped: a request is not recorded in {self.directory} (sample {request.sample_index}, "
                f"{len(request.messages)} messages, json_mode={request.json_mode}); the code, the data or the "
                "options differ from the recorded run"
            )
        if record.response is None:
            assert record.error is not None
            raise record.error.to_error()
        return record.response.model_copy(update={"source": "replay"})

    async def aclose(self) -> None:
        return None


def _listing(ids: list[str]) -> str:
    """The first few ids, and how many more."""
    more = f" and {len(ids) - LISTED} more" if len(ids) > LISTED else ""
    return ", ".join(ids[:LISTED]) + more
