"""litellm: ``completion``, ``text_completion``, ``embedding`` and ``responses`` (and their
``a*`` twins), stream or not, whatever provider it routes to.

litellm answers in OpenAI's shapes for every provider (its ``Usage``: ``prompt_tokens``
inclusive of cache, ``prompt_tokens_details.cached_tokens`` and ``cache_write_tokens``,
``completion_tokens_details.reasoning_tokens``; the Responses API's ``input_tokens`` and
``output_tokens``), so responses and stream chunks are read by the OpenAI readers of each
endpoint (:mod:`.openai_sdk`). The provider is litellm's own routing of the model
(``get_llm_provider``), named as the semantic conventions name it; the request model is the
provider's model id (``anthropic/claude-x`` -> ``claude-x``). While a litellm call is
recorded, SDK and HTTP calls litellm makes inside it (some providers go through an SDK litellm
imports; ``responses`` falls back to ``completion`` for some providers) are part of it and not
recorded again.
"""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any, AsyncIterator, Callable, Iterator, NamedTuple

from ... import faults
from ...call import Call
from ...endpoints import server_of
from ...request import Request
from ...usage import Usage
from ..lifecycle import Response, async_wrapper, open_call, stop_with, sync_wrapper
from ..wire.openai import (
    chat_request,
    chat_response,
    ChatAccumulator,
    completions_request,
    completions_response,
    CompletionsAccumulator,
    embeddings_request,
    embeddings_response,
    responses_request,
    responses_response,
    ResponsesAccumulator,
)
from ..sent import RawEvents, Sent, inside_gateway
from ..stream import not_an_event_stream, wrap_stream

__all__ = ["wrapper"]

#: litellm's provider names -> ``gen_ai.provider.name``
_PROVIDERS = {
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai",
    "text-completion-openai": "openai",
    "text-completion-codestral": "mistral_ai",
}


def _route(kwargs: dict[str, Any]) -> tuple[str, str | None]:
    """(``gen_ai.provider.name``, the provider's model id) of the call as litellm routes it."""
    import litellm

    model = kwargs.get("model")
    try:
        routed, provider, _key, _base = litellm.get_llm_provider(
            model=model,
            custom_llm_provider=kwargs.get("custom_llm_provider"),
            api_base=kwargs.get("api_base"),
        )
    except Exception:  # litellm raises the same error in the call itself
        return "litellm", model if isinstance(model, str) else None
    return _PROVIDERS.get(provider, provider or "litellm"), routed


def _server(kwargs: dict[str, Any]) -> tuple[str | None, int | None]:
    base = kwargs.get("api_base") or kwargs.get("base_url")
    return server_of(base) if isinstance(base, str) else (None, None)


class _Gateway(Sent):
    """One litellm call's record of what its provider sent (litellm's answer may be its
    own: a 0/0 usage for a response without one, a stream's tokens counted locally), set as
    :data:`.sent.inside_gateway` while litellm runs; and the caller's arguments."""

    __slots__ = ("kwargs",)

    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.kwargs = kwargs


class _Kind(NamedTuple):
    """One litellm function: its operation (``gen_ai.operation.name``), how its request is
    described, its answer read, and its stream read (:class:`_Held` over OpenAI's reader)."""

    operation: str
    request: Callable[[dict[str, Any]], Request | None]
    response: Callable[[Any], Response]
    accumulator: Callable[..., Any] | None


def _open(
    kind: _Kind, instance: Any, args: tuple, kwargs: dict[str, Any]
) -> tuple[Call, tuple, dict, _Gateway] | None:
    """Open the call as litellm routes it (:data:`.lifecycle.Start`)."""
    try:
        provider, model = _route(kwargs)
        address, port = _server(kwargs)
    except Exception as exc:
        faults.report("internal", exc)
        return None
    call = open_call(
        kind.request,
        {**kwargs, "model": model},
        operation=kind.operation,
        provider=provider,
        request_model=model,
        stream=kwargs.get("stream") is True,
        server_address=address,
        server_port=port,
    )
    return None if call is None else (call, args, kwargs, _Gateway(kwargs))


class _Held:
    """A stream accumulator mixin (before OpenAI's reader of the endpoint): usage without a
    provider of its own (the call's), held to what the provider's own events said when they
    were seen (:class:`_Gateway`)."""

    def __init__(self, gateway: _Gateway, inner: Any) -> None:
        super().__init__(gateway.kwargs, gateway.kwargs)
        self.gateway = gateway
        self.inner = inner if RawEvents.watch(inner, gateway) else None  # the provider's stream
        self.silent = False  # the provider sent no event: nothing to estimate the output from

    def final_text(self) -> Any:
        return None if self.silent else super().final_text()

    def end_call(
        self,
        call: Call,
        how: str,
        error: BaseException | str | None = None,
        once: str | None = None,
    ) -> None:
        sent = self.gateway
        if self.inner is not None and not sent.seen and not self.text:  # no event, no text:
            # any usage is litellm's own (text without an event seen: litellm read the
            # stream before it was watched, and nothing is known of what was sent)
            self.usage, self.billing, self.silent = None, None, True
            if error is None and how == "exhausted":  # and was it a stream at all?
                error, how = not_an_event_stream(self.inner), "error"
        if error is None and sent.error is not None:  # the provider's usage broke the rule
            if not self.invalid:  # (seen by the SDK's decoder or litellm's own HTTP client)
                faults.report("usage_invalid", sent.error)
                self.invalid = True
        elif (
            error is None
            and self.inner is not None
            and sent.seen
            and not sent.usage
            and self.usage is not None
        ):  # litellm's own count
            self.usage = self.usage.replace(source="estimated")
        if self.usage is not None and self.usage.provider is not None:
            self.usage = self.usage.replace(provider=None)
        super().end_call(call, how, error, once)


class _Accumulator(_Held, ChatAccumulator):
    """Chat completion chunks."""


class _TextAccumulator(_Held, CompletionsAccumulator):
    """Text completion chunks."""


class _EventsAccumulator(_Held, ResponsesAccumulator):
    """Responses API events."""


def _held(answer: Response, sent: Sent) -> Response:
    """litellm's answer held to what its provider sent (when it was seen): usage that broke
    the rule is unusable; usage the provider never sent (litellm's 0/0) is unknown."""
    if sent.error is not None:
        faults.report("usage_invalid", sent.error)
        return answer._replace(usage=Usage(), billing=None)
    if sent.seen and not sent.usage:
        return answer._replace(usage=None, billing=None)
    if answer.usage is not None:
        return answer._replace(usage=answer.usage.replace(provider=None))
    return answer


def _within(gateway: _Gateway, make_call: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """``make_call`` run as part of the call: with :data:`.sent.inside_gateway` set."""
    if is_async:

        async def opened(*args: Any, **kwargs: Any) -> Any:
            token = inside_gateway.set(gateway)
            try:
                return await make_call(*args, **kwargs)
            finally:
                inside_gateway.reset(token)

        return opened

    def opened_sync(*args: Any, **kwargs: Any) -> Any:
        token = inside_gateway.set(gateway)
        try:
            return make_call(*args, **kwargs)
        finally:
            inside_gateway.reset(token)

    return opened_sync


def _lazy(result: Any, gateway: _Gateway, is_async: bool) -> None:
    """litellm opens some providers' streams (Gemini's) at the first read (``make_call``):
    that request is still the call's (its provider's answer seen as sent, SDK calls inside
    it not recorded again)."""
    make_call = getattr(result, "make_call", None)
    if callable(make_call) and getattr(result, "completion_stream", None) is None:
        result.make_call = _within(gateway, make_call, is_async)
    inner = getattr(result, "completion_stream", None)  # a text completion's: a generator
    if is_async and inspect.isasyncgen(inner):  # that sends its request at the first read
        result.completion_stream = _gated_async(inner, gateway)
    elif not is_async and inspect.isgenerator(inner):
        result.completion_stream = _gated(inner, gateway)


def _gated(steps: Iterator[Any], gateway: _Gateway) -> Iterator[Any]:
    """``steps``, each run as part of the call (with :data:`.sent.inside_gateway` set);
    closed with it."""
    try:
        while True:
            token = inside_gateway.set(gateway)
            try:
                item = next(steps)
            except StopIteration:
                return
            finally:
                inside_gateway.reset(token)
            yield item
    finally:
        steps.close()  # type: ignore[attr-defined]


async def _gated_async(steps: AsyncIterator[Any], gateway: _Gateway) -> AsyncIterator[Any]:
    """:func:`_gated`, awaited."""
    try:
        while True:
            token = inside_gateway.set(gateway)
            try:
                item = await steps.__anext__()
            except StopAsyncIteration:
                return
            finally:
                inside_gateway.reset(token)
            yield item
    finally:
        await steps.aclose()  # type: ignore[attr-defined]


def _read(kind: _Kind, is_async: bool, call: Call, result: Any, gateway: _Gateway) -> Any:
    """End the call from litellm's answer, or hand its stream to the proxy."""
    if (
        call.stream
        and kind.accumulator is not None
        and hasattr(result, "__anext__" if is_async else "__next__")
    ):
        try:
            _lazy(result, gateway, is_async)
        except Exception as exc:
            faults.report("internal", exc)
        acc = kind.accumulator(gateway, getattr(result, "completion_stream", None))
        return wrap_stream(result, call, acc, is_async)
    stop_with(call, _held(kind.response(result), gateway))
    return result


_KINDS = {
    "completion": _Kind("chat", chat_request, chat_response, _Accumulator),
    "text_completion": _Kind(
        "text_completion", completions_request, completions_response, _TextAccumulator
    ),
    "embedding": _Kind("embeddings", embeddings_request, embeddings_response, None),
    "responses": _Kind("chat", responses_request, responses_response, _EventsAccumulator),
}


def _wrapper(kind: _Kind, is_async: bool) -> Callable[..., Any]:
    """The one path (:mod:`.lifecycle`); a gateway: calls litellm makes inside are its own."""
    wrap = async_wrapper if is_async else sync_wrapper
    return wrap(partial(_open, kind), partial(_read, kind, is_async), gateway=True)


#: (name, is_async) -> its wrapper, built once
_WRAPPERS = {
    (name, is_async): _wrapper(kind, is_async)
    for name, kind in _KINDS.items()
    for is_async in (False, True)
}


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of one litellm function or its ``a*`` twin (:mod:`.litellm_patches`)."""
    return _WRAPPERS[name, is_async]
