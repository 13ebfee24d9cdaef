"""OpenAI's wire format, spoken by most providers and gateways: chat completions, Responses,
embeddings, legacy completions, transcriptions and Assistants runs. The readers take the
``openai`` SDK's objects and decoded JSON alike: the SDK capture (:mod:`..sdk.openai`),
litellm, Batch results, watsonx and the HTTP layer share them. A POST is recognised by its
path (Azure OpenAI's ``/openai/deployments/{name}/...`` too, the deployment naming the model
when the body does not). Groq's ``x_groq`` usage, DeepSeek's cache counts and OpenRouter's
cost are read by :mod:`.compatible`."""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, repeat
from operator import is_not, itemgetter
from typing import Any

from ...request import Request, output_limit
from ...usage import Billing, Usage
from ..lifecycle import _NOT_GIVEN, Response, given, sdk_field
from ..sent import Sent, SentStream, note
from ..stream import Accumulator, StreamObserver, finish_reasons
from .base import Wire, by_suffix
from .compatible import (
    billed_units,
    has_vendor_fields,
    output_tokens,
    unlisted_reasoning,
    vendor_usage,
)

__all__ = [
    "SUFFIXES",
    "ChatAccumulator",
    "CompletionsAccumulator",
    "ResponsesAccumulator",
    "RetrievedAccumulator",
    "RunAccumulator",
    "TranscriptionAccumulator",
    "chat_request",
    "chat_response",
    "completions_request",
    "completions_response",
    "embeddings_request",
    "embeddings_response",
    "recognise",
    "responses_request",
    "responses_response",
    "run_response",
    "transcription_response",
]

_get = sdk_field


def _chat_usage(usage: Any, model: str | None, response_id: str | None) -> Usage | None:
    if usage is None:
        return None
    reasoning = _get(_get(usage, "completion_tokens_details"), "reasoning_tokens")
    output = _get(usage, "completion_tokens")
    if reasoning:  # counted apart by some providers (xAI)
        output = output_tokens(usage, _get(usage, "prompt_tokens"), output, reasoning)
    else:  # Gemini's thoughts: in the total only
        reasoning = unlisted_reasoning(usage, _get(usage, "prompt_tokens"), output) or reasoning
        output = output + reasoning if reasoning else output
    found = Usage(
        input_tokens=_get(usage, "prompt_tokens"),
        output_tokens=output,
        cache_read_tokens=_get(_get(usage, "prompt_tokens_details"), "cached_tokens"),
        cache_write_tokens=_get(_get(usage, "prompt_tokens_details"), "cache_write_tokens"),
        reasoning_tokens=reasoning,
        model=model,
        provider=None,
        response_id=response_id,
    )
    return vendor_usage(usage, found) if has_vendor_fields(usage) else found


def _responses_usage(usage: Any, model: str | None, response_id: str | None) -> Usage | None:
    if usage is None:
        return None
    details = _get(usage, "input_tokens_details")
    return Usage(
        input_tokens=_get(usage, "input_tokens"),
        output_tokens=_get(usage, "output_tokens"),
        cache_read_tokens=_get(details, "cached_tokens"),
        cache_write_tokens=_get(details, "cache_write_tokens"),
        reasoning_tokens=_get(_get(usage, "output_tokens_details"), "reasoning_tokens"),
        model=model,
        provider=None,
        response_id=response_id,
    )


def chat_request(kwargs: dict[str, Any]) -> Request:
    model, messages, tools = kwargs.get("model"), kwargs.get("messages"), kwargs.get("tools")
    functions, fmt = kwargs.get("functions"), kwargs.get("response_format")
    limit, legacy = kwargs.get("max_completion_tokens"), kwargs.get("max_tokens")
    if tools is not None and type(tools).__name__ in _NOT_GIVEN:  # the SDKs' "not given"
        tools = None  # sentinels read as absent
    if not tools and functions and type(functions).__name__ not in _NOT_GIVEN:
        tools = [{"type": "function", "function": f} for f in functions]
    return Request(
        api="openai_chat",
        model=model if isinstance(model, str) else None,
        messages=messages if messages and type(messages).__name__ not in _NOT_GIVEN else [],
        tools=tools or (),
        response_format=fmt if isinstance(fmt, dict) else None,
        max_output_tokens=None
        if limit is None and legacy is None
        else output_limit(given(limit), given(legacy)),
    )


_STANDARD_TIERS = frozenset(("default", "auto", "standard"))


def _tier(value: Any) -> dict[str, str] | None:
    """The price context of a response's ``service_tier`` (None for the standard tier)."""
    return (
        {"service_tier": value} if isinstance(value, str) and value not in _STANDARD_TIERS else None
    )


def _chat_billing(usage: Any, tier: Any) -> Billing | None:
    """Service tier and audio tokens of a chat completion (None when neither applies)."""
    context = _tier(tier)
    heard = (
        _get(_get(usage, "prompt_tokens_details"), "audio_tokens") if usage is not None else None
    )
    spoken = (
        _get(_get(usage, "completion_tokens_details"), "audio_tokens")
        if usage is not None
        else None
    )
    vendor = billed_units(usage) if usage is not None else {}
    if context is None and not heard and not spoken and not vendor:
        return None
    return Billing.of(
        context, {"input_audio_tokens": heard, "output_audio_tokens": spoken, **vendor}
    )


def _object_usage(
    usage: Any, tier: Any, model: str | None, rid: str | None
) -> tuple[Usage | None, Billing | None]:
    """An SDK object's chat usage and billing (what :func:`_chat_usage` and
    :func:`_chat_billing` read from a dict), read by attribute for :func:`chat_response`."""
    found = billing = None
    if usage is not None:
        prompt, completion = usage.prompt_tokens_details, usage.completion_tokens_details
        if (
            (tier is not None and tier not in _STANDARD_TIERS)
            or getattr(prompt, "audio_tokens", None)
            or getattr(completion, "audio_tokens", None)
        ):
            billing = _chat_billing(usage, tier)
        reasoning = getattr(completion, "reasoning_tokens", None)
        output = usage.completion_tokens
        inp, total = usage.prompt_tokens, usage.total_tokens
        if reasoning:  # counted apart by some providers (xAI)
            output = output_tokens(usage, inp, output, reasoning)
        elif total is not None and not (
            type(total) is int
            and type(inp) is int
            and type(output) is int
            and total <= inp + output
        ):
            # Gemini's thoughts: in the total only (a total within input + output,
            # OpenAI's, says nothing more: no call)
            reasoning = unlisted_reasoning(usage, inp, output) or reasoning
            output = output + reasoning if reasoning else output
        found = Usage(
            input_tokens=inp,
            output_tokens=output,
            cache_read_tokens=getattr(prompt, "cached_tokens", None),
            cache_write_tokens=getattr(prompt, "cache_write_tokens", None),
            reasoning_tokens=reasoning,
            model=model,
            response_id=rid,
        )
        # another provider's own fields (has_vendor_fields, for an SDK object: its
        # extra fields, pydantic's ``__pydantic_extra__``; empty for OpenAI's own)
        if (
            has_vendor_fields(usage)
            if isinstance(usage, dict)
            else getattr(usage, "__pydantic_extra__", None)
        ):
            found, billing = vendor_usage(usage, found), _chat_billing(usage, tier)
    elif tier is not None and tier not in _STANDARD_TIERS:
        billing = _chat_billing(usage, tier)
    return found, billing


def chat_response(result: Any) -> Response:
    """A chat completion's response (SDK object or dict): usage, model, id, finish reasons and
    billing."""
    if not isinstance(result, dict):
        # an SDK object: plain attribute reads (kept for speed: docs/benchmarks.md;
        # tests/core/test_positional_builds.py holds it to the field-by-field reading below)
        try:
            model, rid, usage, tier = result.model, result.id, result.usage, result.service_tier
            reasons = []
            for choice in result.choices or ():
                if choice.finish_reason:
                    reasons.append(str(choice.finish_reason))
            found, billing = _object_usage(usage, tier, model, rid)
            return Response(found, model, rid, tuple(reasons), billing)
        except AttributeError:
            pass  # another shape: field by field below
    model, rid, usage = _get(result, "model"), _get(result, "id"), _get(result, "usage")
    reasons = finish_reasons([_get(c, "finish_reason") for c in _get(result, "choices") or ()])
    return Response(
        _chat_usage(usage, model, rid),
        model,
        rid,
        tuple(reasons),
        _chat_billing(usage, _get(result, "service_tier")),
    )


_CHOICES, _DELTA = itemgetter("choices"), itemgetter("delta")


def _plain_prefix(batch: list[Any]) -> int:
    """How many of the decoded chat chunks ``batch`` begins with are plain: dicts whose
    choices are dicts with a dict delta, without tool calls, usage or usage in Groq's
    ``x_groq`` (chunk by chunk: asked only when a batch is not all plain)."""
    for index, data in enumerate(batch):
        try:
            if data.get("usage") is not None or "usage" in (data.get("x_groq") or ()):
                return index
            for choice in data["choices"]:
                if choice["delta"].get("tool_calls"):
                    return index  # read one by one from here: their text in order
        except (AttributeError, KeyError, TypeError):  # another shape
            return index
    return len(batch)


class ChatAccumulator(SentStream, Accumulator):
    def __init__(self, given: dict[str, Any], sent: dict[str, Any]) -> None:
        super().__init__()
        self.take_header_cost()
        asked = _get(_get(given, "stream_options") or {}, "include_usage")
        self.hide_usage_chunk = sent is not given and not asked
        self.made_data: list[Any] = []  # decoded chunks made, not read yet (read_made)

    reads_made = True

    def reader(self, own: Any, sent: Sent, observer: StreamObserver) -> Any:
        """The stream's ``_process_response_data`` (see ``SentStream``): each decoded chunk
        is kept as made, for :meth:`read_made` (every ``BATCH`` chunks and at the end): per
        chunk, a list append. Where the usage chunk asked for is to be hidden, that chunk
        (no choices, usage) is noted for the stream proxy to leave out."""
        append = self.made_data.append
        if not self.hide_usage_chunk:

            def process(*, data: Any, cast_to: Any, response: Any) -> Any:
                chunk = own(data=data, cast_to=cast_to, response=response)
                append(data)
                return chunk

            return process
        hidden = observer.hidden

        def process_hiding(*, data: Any, cast_to: Any, response: Any) -> Any:
            chunk = own(data=data, cast_to=cast_to, response=response)
            append(data)
            if type(data) is dict and not data.get("choices") and data.get("usage") is not None:
                hidden.append(chunk)
            return chunk

        return process_hiding

    def read_made(self, observer: StreamObserver) -> None:
        """The chunks made since the last read, in order. A batch of plain ones (choices
        with a delta, no tool call or usage; see :func:`_plain_prefix`), nearly every batch,
        is read in bulk by C-level passes (no Python per chunk); otherwise its plain start
        so, and from the first other chunk on each as before, as sent (``note``) and as a
        chunk (``observer.item``: usage, finish reasons, tool calls, Groq's usage)."""
        held = self.made_data
        count = len(held)
        if not count:
            return
        batch = held[:count]
        del held[:count]  # (a chunk made meanwhile stays for the next read)
        try:
            choices = list(chain.from_iterable(map(_CHOICES, batch)))
            deltas = list(map(_DELTA, choices))
            plain = count
            if (
                any(map(dict.get, deltas, repeat("tool_calls")))
                or any(map(is_not, map(dict.get, batch, repeat("usage")), repeat(None)))
                or "x_groq" in batch[-1]
            ):
                plain = _plain_prefix(batch)
        except (KeyError, TypeError):  # not a dict, no choices, a choice or delta not a dict
            plain = _plain_prefix(batch)
        if plain == count:
            self._read_plain(choices, deltas)
            return
        if plain:
            choices = list(chain.from_iterable(map(_CHOICES, batch[:plain])))
            self._read_plain(choices, list(map(_DELTA, choices)))
        sent = self.sent
        for data in batch[plain:]:
            if sent is not None:
                note(sent, data)
            observer.item(data)

    def _read_plain(self, choices: list[Any], deltas: list[Any]) -> None:
        """The choices of plain decoded chunks, and their deltas: text and finish reasons."""
        text = "".join(filter(None, map(dict.get, deltas, repeat("content"))))
        if text:
            self.text.append(text)
        for reason in filter(None, map(dict.get, choices, repeat("finish_reason"))):
            self.finish_reasons.append(str(reason))

    def first(self, chunk: Any) -> None:
        if self.model is None:
            self.model, self.response_id = _get(chunk, "model"), _get(chunk, "id")

    def add(self, chunk: Any) -> bool:
        if type(chunk) is dict:  # decoded JSON (the HTTP layer's, a raw body's)
            return self._add_dict(chunk)
        try:  # SDK chunk objects: plain attribute access, this runs for every chunk
            choices, usage = chunk.choices, chunk.usage
            if self.model is None:
                self.model, self.response_id = chunk.model, chunk.id
            for choice in choices:
                delta = choice.delta
                content, calls, reason = delta.content, delta.tool_calls, choice.finish_reason
                if content:
                    self.text.append(content)
                if calls:
                    self._tool_text(calls)
                if reason:
                    self.finish_reasons.append(str(reason))
        except AttributeError:
            return self._add_any(chunk)
        if self.finish_reasons and usage is None and self.usage is None:
            usage = _get(_get(chunk, "x_groq"), "usage")  # Groq: usage with the last chunk
        if usage is not None:
            self.usage = _chat_usage(usage, self.model, self.response_id)
            self.billing = _chat_billing(usage, getattr(chunk, "service_tier", None))
            if self.hide_usage_chunk and not choices:
                return False  # the usage-only chunk we asked for: not the caller's
        return True

    def _tool_text(self, calls: Any) -> None:
        for call in calls:
            arguments = _get(_get(call, "function"), "arguments")
            if arguments:
                self.text.append(arguments)

    def _add_dict(self, chunk: dict[str, Any]) -> bool:
        """A decoded chunk, read with dict look-ups (a value of another shape: field by
        field, as :meth:`_add_any` reads it)."""
        self.model = chunk.get("model") or self.model
        self.response_id = chunk.get("id") or self.response_id
        choices = chunk.get("choices") or ()
        for choice in choices:
            delta = choice.get("delta") if type(choice) is dict else None
            if type(delta) is not dict:
                self._add_choice(choice)
                continue
            content, calls = delta.get("content"), delta.get("tool_calls")
            if content:
                self.text.append(content)
            if calls:
                self._tool_text(calls)
            reason = choice.get("finish_reason")
            if reason:
                self.finish_reasons.append(str(reason))
        return self._add_usage(chunk, chunk.get("usage"), choices)

    def _add_any(self, chunk: Any) -> bool:
        """Chunks of any shape (unexpected SDK versions), field by field."""
        self.model = _get(chunk, "model") or self.model
        self.response_id = _get(chunk, "id") or self.response_id
        choices = _get(chunk, "choices") or ()
        for choice in choices:
            self._add_choice(choice)
        return self._add_usage(chunk, _get(chunk, "usage"), choices)

    def _add_choice(self, choice: Any) -> None:
        delta = _get(choice, "delta")
        content = _get(delta, "content")
        if content:
            self.text.append(content)
        self._tool_text(_get(delta, "tool_calls") or ())
        reason = _get(choice, "finish_reason")
        if reason:
            self.finish_reasons.append(str(reason))

    def _add_usage(self, chunk: Any, usage: Any, choices: Any) -> bool:
        """A chunk's usage (Groq's in ``x_groq``, with the last chunk); False for the usage
        chunk asked for, not the caller's."""
        if usage is None and self.finish_reasons and self.usage is None:
            usage = _get(_get(chunk, "x_groq"), "usage")  # Groq: usage with the last chunk
        if usage is not None:
            self.usage = _chat_usage(usage, self.model, self.response_id)
            self.billing = _chat_billing(usage, _get(chunk, "service_tier"))
            if self.hide_usage_chunk and not choices:
                return False  # the usage-only chunk we asked for: not the caller's
        return True


def responses_request(kwargs: dict[str, Any]) -> Request:
    text = _get(kwargs, "text")
    chained = _get(kwargs, "previous_response_id")
    mode = _get(_get(kwargs, "reasoning"), "mode")
    return Request(
        "openai_responses",
        _get(kwargs, "model"),
        _get(kwargs, "input") or [],
        system=_get(kwargs, "instructions"),
        tools=_get(kwargs, "tools") or [],
        response_format=text if isinstance(text, dict) else None,
        chained=chained if isinstance(chained, str) else None,
        max_output_tokens=output_limit(_get(kwargs, "max_output_tokens")),
        reasoning_mode=mode if isinstance(mode, str) else None,
    )


_PENDING = frozenset(("queued", "in_progress"))


def _responses_billing(result: Any) -> Billing | None:
    """Service tier and hosted-tool calls of a Responses result: web searches (the billable
    count in ``tool_usage`` when given, else the ``web_search_call`` items that searched)
    and file searches (``file_search_call`` items); image generation is not priced here."""
    web = files = images = 0
    tool_usage = _get(result, "tool_usage")
    if tool_usage is not None:
        web = _get(_get(tool_usage, "web_search"), "num_requests") or 0
        images = _get(_get(tool_usage, "image_gen"), "total_tokens") or 0
    for item in _get(result, "output") or ():
        kind = _get(item, "type")
        if kind == "file_search_call":
            files += 1
        elif kind == "web_search_call" and tool_usage is None:
            action = _get(_get(item, "action"), "type")
            web += action in (None, "search")  # opening or finding in a page is not a search
    context = _tier(_get(result, "service_tier"))
    if context is None and not (web or files or images):
        return None
    return Billing.of(
        context, {"web_searches": web, "storage_searches": files, "image_generation_tokens": images}
    )


def responses_response(result: Any) -> Response:
    model, rid = _get(result, "model"), _get(result, "id")
    status = _get(result, "status")
    reason = _get(_get(result, "incomplete_details"), "reason")
    reasons = (str(reason or status),) if (reason or status) else ()
    return Response(
        _responses_usage(_get(result, "usage"), model, rid),
        model,
        rid,
        reasons,
        _responses_billing(result),
        pending=status in _PENDING,
    )


class ResponsesAccumulator(SentStream, Accumulator):
    def __init__(self, given: dict[str, Any], sent: dict[str, Any]) -> None:
        super().__init__()
        self.take_header_cost()

    def add(self, event: Any) -> bool:
        kind = _get(event, "type") or ""
        if kind == "response.output_text.delta" or kind == "response.function_call_arguments.delta":
            delta = _get(event, "delta")
            if delta:
                self.text.append(delta)
        response = _get(event, "response")
        if response is not None:
            self.model = _get(response, "model") or self.model
            self.response_id = _get(response, "id") or self.response_id
            usage = _get(response, "usage")
            if usage is not None:
                self.usage = _responses_usage(usage, self.model, self.response_id)
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                answer = responses_response(response)
                self.finish_reasons = list(answer.finish_reasons)
                self.billing = answer.billing
        return True


class RetrievedAccumulator(ResponsesAccumulator):
    """A retrieved response's stream: a gateway's header is not this usage's bill."""

    def take_header_cost(self) -> None:
        self.header_cost = None


def embeddings_request(kwargs: dict[str, Any]) -> Request:
    inputs = _get(kwargs, "input")
    # an embedding has no output tokens: nothing to reserve for them
    return Request(
        "openai_embeddings",
        _get(kwargs, "model"),
        [inputs] if isinstance(inputs, str) else inputs or [],
        max_output_tokens=0,
    )


def embeddings_response(result: Any) -> Response:
    usage = _get(result, "usage")
    model = _get(result, "model")
    tokens = _get(usage, "prompt_tokens") if usage is not None else None
    return Response(Usage(input_tokens=tokens, model=model) if usage is not None else None, model)


# -- legacy text completions ------------------------------------------------------------------
def completions_request(kwargs: dict[str, Any]) -> Request:
    prompt = _get(kwargs, "prompt")
    return Request(
        "openai_completions",
        _get(kwargs, "model"),
        [prompt] if isinstance(prompt, str) else list(prompt or ()),
        max_output_tokens=output_limit(_get(kwargs, "max_tokens")),
    )


def completions_response(result: Any) -> Response:
    model, rid = _get(result, "model"), _get(result, "id")
    reasons = finish_reasons([_get(c, "finish_reason") for c in _get(result, "choices") or ()])
    return Response(_chat_usage(_get(result, "usage"), model, rid), model, rid, tuple(reasons))


class CompletionsAccumulator(ChatAccumulator):
    reads_made = False
    reader = SentStream.reader  # its chunks are read by the stream proxy (add)

    def add(self, chunk: Any) -> bool:
        self.model = self.model or _get(chunk, "model")
        self.response_id = self.response_id or _get(chunk, "id")
        choices = _get(chunk, "choices") or ()
        for choice in choices:
            text, reason = _get(choice, "text"), _get(choice, "finish_reason")
            if text:
                self.text.append(text)
            if reason:
                self.finish_reasons.append(str(reason))
        usage = _get(chunk, "usage")
        if usage is not None:
            self.usage = _chat_usage(usage, self.model, self.response_id)
            if self.hide_usage_chunk and not choices:
                return False  # the usage-only chunk we asked for: not the caller's
        return True


# -- audio transcriptions and translations ----------------------------------------------------
def transcription_response(result: Any) -> Response:
    """Token usage (gpt-4o-transcribe: audio input tokens priced apart) or the seconds of
    audio billed (whisper-1); a plain-text result carries neither."""
    usage = _get(result, "usage") if not isinstance(result, str) else None
    if usage is None:
        return Response(None)
    if _get(usage, "type") == "duration":
        return Response(None, billing=Billing.of(units={"audio_seconds": _get(usage, "seconds")}))
    audio = _get(_get(usage, "input_token_details"), "audio_tokens")
    return Response(
        Usage(input_tokens=_get(usage, "input_tokens"), output_tokens=_get(usage, "output_tokens")),
        billing=Billing.of(units={"input_audio_tokens": audio}) if audio else None,
    )


class TranscriptionAccumulator(Accumulator):
    def __init__(self, given: dict[str, Any], sent: dict[str, Any]) -> None:
        super().__init__()

    def add(self, event: Any) -> bool:
        kind = _get(event, "type")
        if kind == "transcript.text.delta":
            delta = _get(event, "delta")
            if delta:
                self.text.append(delta)
        elif kind == "transcript.text.done" and _get(event, "usage") is not None:
            answer = transcription_response(event)
            self.usage, self.billing = answer.usage, answer.billing
        return True


# -- Assistants runs ----------------------------------------------------------------------------
_RUN_PENDING = frozenset(("queued", "in_progress", "requires_action", "cancelling"))


def run_response(result: Any) -> Response:
    """A run: its usage once it reached a terminal state (null before), counted once per run."""
    model, rid, status = _get(result, "model"), _get(result, "id"), _get(result, "status")
    usage = _chat_usage(_get(result, "usage"), model, rid)
    return Response(
        usage, model, rid, (str(status),) if status else (), pending=status in _RUN_PENDING
    )


class RunAccumulator(Accumulator):
    def __init__(self, given: dict[str, Any], sent: dict[str, Any]) -> None:
        super().__init__()

    def add(self, event: Any) -> bool:
        kind = _get(event, "event") or ""
        data = _get(event, "data")
        if kind == "thread.message.delta":
            for part in _get(_get(data, "delta"), "content") or ():
                value = _get(_get(part, "text"), "value")
                if value:
                    self.text.append(value)
        elif kind.startswith("thread.run.") and kind.count(".") == 2:
            answer = run_response(data)
            self.model, self.response_id = answer.model or self.model, answer.response_id
            self.finish_reasons, self.pending = list(answer.finish_reasons), answer.pending
            if answer.usage is not None:
                self.usage = answer.usage
        return True


# -- HTTP: a POST recognised by its path ----------------------------------------------------
def _model(path: str, body: dict[str, Any]) -> str | None:
    """The body's model, else an Azure deployment's name (``.../deployments/{name}/...``)."""
    model = body.get("model")
    if isinstance(model, str):
        return model
    _, found, after = path.partition("/deployments/")
    return (after.split("/", 1)[0] or None) if found else None


def _described(read: Callable[[dict[str, Any]], Request]) -> Callable[..., Request]:
    """``read(body)`` with the model named by the path when the body names none."""

    def request(body: dict[str, Any], model: str | None) -> Request:
        found = read(body)
        return found if found.model or model is None else found._replace(model=model)

    return request


def _stream(kind: type) -> Callable[[dict[str, Any]], Any]:
    """A stream accumulator of ``kind`` for a request body (the body is what was sent: no
    usage chunk to hide)."""
    return lambda body: kind(body, body)


def _goes_on(event: bytes) -> bool:
    """A chat or completions chunk, as sent, of one choice that goes on (its finish reason
    null): it adds text, and at most a running usage (read at the end when no usage was read
    after it). A chunk without a choice (the usage chunk), with a choice that ends, or with
    several choices, is read at once. A key followed by ``:`` is never inside a JSON string
    (its quotes would be escaped)."""
    values = event.split(b'"finish_reason":')  # one choice: two parts
    return len(values) == 2 and values[1].lstrip()[:4] == b"null"


_CHAT = Wire(
    "chat",
    _described(chat_request),
    chat_response,
    _stream(ChatAccumulator),
    model=_model,
    plain=_goes_on,
)
_RESPONSES = Wire(
    "chat",
    _described(responses_request),
    responses_response,
    _stream(ResponsesAccumulator),
    model=_model,
)
_EMBEDDINGS = Wire("embeddings", _described(embeddings_request), embeddings_response, model=_model)
_COMPLETIONS = Wire(
    "text_completion",
    _described(completions_request),
    completions_response,
    _stream(CompletionsAccumulator),
    model=_model,
    plain=_goes_on,
)

#: path suffix -> request shape, the more specific first
_ROUTES = (
    ("/chat/completions", _CHAT),
    ("/responses", _RESPONSES),
    ("/embeddings", _EMBEDDINGS),
    ("/completions", _COMPLETIONS),
)
SUFFIXES = tuple(suffix for suffix, _ in _ROUTES)


def recognise(path: str) -> Wire | None:
    """The OpenAI-shaped request a POST to ``path`` is, or None."""
    return by_suffix(_ROUTES, path)
