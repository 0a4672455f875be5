"""The LLM behind one small async interface: OpenAI-compatible servers, the embedded model, cache and replay.

Entry points: `build_model(spec, ...)` for runs, `check_model(spec, ...)` for `edsb check-model`, and
`TranscriptWriter` to record every request of a run (which `replay:<run dir>` answers from).
"""

from edsb.llm.cache import CachedChatModel, CacheError, ResponseCache, default_cache_path
from edsb.llm.errors import ApiKeyError, LocalModelError, ModelSpecError, ReplayError, TransportError
from edsb.llm.factory import build_model, check_model, check_model_async
from edsb.llm.local import LocalChatModel, bundled_gguf_path
from edsb.llm.openai_client import OpenAIChatModel, tell_window_note, window_note_of
from edsb.llm.protocol import ChatModel, ChatRequest, ChatResponse, Message, request_key
from edsb.llm.replay import ReplayChatModel
from edsb.llm.retry import RetryPolicy
from edsb.llm.spec import ModelSpec, parse_model_spec
from edsb.llm.transcripts import (
    TranscriptRecord,
    TranscriptWriter,
    read_transcripts,
    transcripts_by_run,
    transcripts_dir,
)

__all__ = [
    "ApiKeyError",
    "CacheError",
    "CachedChatModel",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "LocalChatModel",
    "LocalModelError",
    "Message",
    "ModelSpec",
    "ModelSpecError",
    "OpenAIChatModel",
    "ReplayChatModel",
    "ReplayError",
    "ResponseCache",
    "RetryPolicy",
    "TranscriptRecord",
    "TranscriptWriter",
    "TransportError",
    "build_model",
    "bundled_gguf_path",
    "check_model",
    "check_model_async",
    "default_cache_path",
    "parse_model_spec",
    "read_transcripts",
    "request_key",
    "tell_window_note",
    "transcripts_by_run",
    "transcripts_dir",
    "window_note_of",
]
