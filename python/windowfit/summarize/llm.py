"""The LLM summarizer: any OpenAI-compatible chat-completions endpoint (official ``openai`` SDK)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from windowfit._twins import CallOp, call
from windowfit.errors import InvalidArgumentError
from windowfit.summarize.base import Message, SummaryError, TwinSummarizer
from windowfit.summarize.prompts import build_summary_prompt

logger = logging.getLogger(__name__)

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# Reasoning models reject max_tokens/temperature and take max_completion_tokens instead.
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else None


class LLMSummarizer(TwinSummarizer):
    """Summaries from any OpenAI-compatible chat-completions endpoint (official ``openai`` SDK).

    ``client`` may be an ``openai.OpenAI`` or ``openai.AsyncOpenAI``; otherwise one is made
    from ``base_url`` / ``api_key`` (OpenAI, DashScope compatible mode for Qwen, DeepSeek,
    vLLM, Ollama...). Timeouts and retries are the SDK's: exponential backoff with jitter,
    honouring ``Retry-After``, on connection errors, timeouts, 408/409/429 and 5xx.

    Every argument falls back to an environment variable, then a default:
    ``model`` ← ``WINDOWFIT_SUMMARY_MODEL`` (``gpt-4o-mini``), ``base_url`` ←
    ``WINDOWFIT_SUMMARY_BASE_URL`` (then the SDK's ``OPENAI_BASE_URL``), ``api_key`` ←
    ``WINDOWFIT_SUMMARY_API_KEY`` (then ``OPENAI_API_KEY``), ``timeout`` (per request) ←
    ``WINDOWFIT_SUMMARY_REQUEST_TIMEOUT`` (60 s), ``max_retries`` ←
    ``WINDOWFIT_SUMMARY_MAX_RETRIES`` (2). ``max_input_tokens`` caps how much history one call
    folds (the manager summarizes longer backlogs over several turns).

    Raises :class:`SummaryError` for empty, refused or cut-off answers, and the SDK's errors
    (``openai.APIStatusError``, ``openai.APITimeoutError``...) once retries are exhausted; the
    manager treats both as a failed, retryable summarization.
    """

    inline = False

    def __init__(
        self,
        client: Any = None,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        temperature: float | None = 0.2,
        language: str | None = None,
        async_client: Any = None,
        max_chars_per_message: int = 2000,
        extra_body: Mapping[str, Any] | None = None,
        max_input_tokens: int | None = 24_000,
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "LLMSummarizer needs the openai package: pip install 'windowfit[openai]'"
            ) from exc
        self._openai = openai
        self.model = model or _env("WINDOWFIT_SUMMARY_MODEL") or "gpt-4o-mini"
        env_timeout = _env("WINDOWFIT_SUMMARY_REQUEST_TIMEOUT")
        env_retries = _env("WINDOWFIT_SUMMARY_MAX_RETRIES")
        try:
            self.timeout = float(timeout if timeout is not None else env_timeout or 60.0)
            self.max_retries = int(max_retries if max_retries is not None else env_retries or 2)
        except ValueError as exc:
            raise InvalidArgumentError(
                f"invalid WINDOWFIT_SUMMARY_REQUEST_TIMEOUT / WINDOWFIT_SUMMARY_MAX_RETRIES: {exc}"
            ) from None
        if self.timeout <= 0 or self.max_retries < 0:
            raise InvalidArgumentError("timeout must be > 0 and max_retries >= 0")
        if language not in (None, "auto", "zh", "en"):
            raise InvalidArgumentError(f"language must be 'zh', 'en' or None, not {language!r}")
        self.language = None if language == "auto" else language
        self.temperature = temperature
        self.max_chars_per_message = max_chars_per_message
        self.extra_body = dict(extra_body) if extra_body else None
        self.max_input_tokens = max_input_tokens

        base_url = base_url or _env("WINDOWFIT_SUMMARY_BASE_URL")
        api_key = api_key or _env("WINDOWFIT_SUMMARY_API_KEY")
        if api_key is None and base_url is not None and not _env("OPENAI_API_KEY"):
            # Local servers (vLLM, Ollama) ignore the key but the SDK insists on one.
            api_key = "EMPTY"
        self._client_kwargs: dict[str, Any] = {
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }
        if base_url is not None:
            self._client_kwargs["base_url"] = base_url
        if api_key is not None:
            self._client_kwargs["api_key"] = api_key

        self._sync_client = None
        self._async_client = async_client
        self._async_clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        # Clients we build ourselves may be rebuilt per event loop; the user's are used as given.
        self._own_clients = client is None and async_client is None
        if client is not None:
            if isinstance(client, openai.AsyncOpenAI):
                self._async_client = client
            else:
                self._sync_client = client
            if timeout is not None or max_retries is not None:
                opts = {"timeout": self.timeout, "max_retries": self.max_retries}
                if self._sync_client is not None:
                    self._sync_client = self._sync_client.with_options(**opts)
                if self._async_client is not None:
                    self._async_client = self._async_client.with_options(**opts)
        elif self._async_client is None:
            # Fail at construction, not on the first long conversation, when misconfigured.
            self._sync_client = openai.OpenAI(**self._client_kwargs)

    def __repr__(self) -> str:
        return f"LLMSummarizer(model={self.model!r}, timeout={self.timeout}, max_retries={self.max_retries})"

    # -- request building -----------------------------------------------------------------------

    def _request(
        self,
        messages: Sequence[Message],
        previous_summary: str,
        target_tokens: int,
        language: str,
    ) -> dict[str, Any]:
        prompt = build_summary_prompt(
            messages,
            previous_summary=previous_summary,
            target_tokens=target_tokens,
            language=language,
            max_chars_per_message=self.max_chars_per_message,
        )
        # Room for the model to overshoot a little; a longer answer is cut and then rejected.
        limit = int(target_tokens * 2.5) + 64
        kwargs: dict[str, Any] = {"model": self.model, "messages": prompt}
        if self.model.lower().rsplit("/", 1)[-1].startswith(_REASONING_PREFIXES):
            kwargs["max_completion_tokens"] = limit + 2048  # reasoning tokens count here too
        else:
            kwargs["max_tokens"] = limit
            if self.temperature is not None:
                kwargs["temperature"] = self.temperature
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        return kwargs

    @staticmethod
    def _answer(response: Any) -> str:
        choices = getattr(response, "choices", None)
        if not choices:
            raise SummaryError("the summary response has no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None) if message is not None else None
        if getattr(choice, "finish_reason", None) == "length":
            raise SummaryError("the summary was cut off at the token limit")
        if getattr(message, "refusal", None):
            raise SummaryError(f"the summarizer refused: {getattr(message, 'refusal', '')}")
        if not isinstance(content, str):
            raise SummaryError("the summary response has no text content")
        text = _THINK_RE.sub("", content).strip()
        if not text:
            raise SummaryError("the summarizer returned an empty summary")
        return text

    # -- protocol -------------------------------------------------------------------------------

    def _summary(
        self, messages: Sequence[Message], previous_summary: str, target_tokens: int, language: str
    ) -> CallOp[str]:
        # The request and the answer's checks are the twins' shared body; only sending differs.
        response = yield call(
            self, "_create", self._request(messages, previous_summary, target_tokens, language)
        )
        return self._answer(response)

    def _create(self, kwargs: dict[str, Any]) -> Any:
        client = self._sync_client or self._sync_twin()
        return client.chat.completions.create(**kwargs)

    def _sync_twin(self) -> Any:
        """A sync client configured like the given async one, for sync calls.

        Driving the async client from a throwaway event loop would leave its connection pool
        bound to a closed loop, so sync calls get a client of their own instead.
        """
        with self._lock:
            if self._sync_client is None:
                c = self._async_client
                self._sync_client = self._openai.OpenAI(
                    api_key=c.api_key,
                    organization=getattr(c, "organization", None),
                    project=getattr(c, "project", None),
                    base_url=str(c.base_url),
                    timeout=c.timeout,
                    max_retries=c.max_retries,
                    default_headers=getattr(c, "_custom_headers", None) or None,
                    default_query=getattr(c, "_custom_query", None) or None,
                )
            return self._sync_client

    async def a_create(self, kwargs: dict[str, Any]) -> Any:
        if self._async_client is not None:
            client = self._async_client
        elif not self._own_clients:
            # Only a user-supplied sync client: keep the event loop free with a worker thread.
            sync_client: Any = self._sync_client
            return await asyncio.to_thread(sync_client.chat.completions.create, **kwargs)
        else:
            client = self._loop_client()
        return await client.chat.completions.create(**kwargs)

    def _loop_client(self) -> Any:
        # An AsyncOpenAI's connection pool belongs to one event loop; keep one per loop.
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async_clients.get(loop)
            if client is None:
                client = self._openai.AsyncOpenAI(**self._client_kwargs)
                self._async_clients[loop] = client
        return client
