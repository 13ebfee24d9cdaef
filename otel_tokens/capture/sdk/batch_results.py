"""Batch results: each billed row of an OpenAI batch's output file or of an Anthropic Message
Batch's results is one call, recorded at batch prices under the agent that reads it, once.

* OpenAI: ``files.content`` (and ``with_raw_response.content``) and ``files.retrieve_content``,
  sync and async. The SDK has read the whole body when it returns: its JSONL lines are read
  then (with ``with_streaming_response``: as the caller reads the stream, through the HTTP
  layer's tee of the response's byte stream), one call per line whose ``response`` has a 2xx
  status and a body with usage (chat completion, Responses, embeddings, legacy completion),
  its model and usage from that body. A file that is not a batch's output (an input file, an
  image) is left after its first line.
* Anthropic: ``messages.batches.results`` and ``beta.messages.batches.results``, sync and
  async. The SDK's JSONL decoder stays the caller's and stays lazy: a ``succeeded`` row is
  recorded as the caller's iteration reaches it; ``errored``, ``canceled`` and ``expired``
  rows are not billed and not recorded.

Read again, a row is not recorded again (:meth:`~otel_tokens.handler.Handler.counted_before`):
within a process its response id is remembered (the last 8192 ids, and every source read to
its end: the last 1024 files or batches per handler); across processes a row whose response
id is in the ledger file (``OTEL_TOKENS_LEDGER_PATH``) is skipped. Without a ledger file,
another process reading the same results records them again. These are GET requests: no
other capture (the HTTP layer records POSTs) records them.
"""

from __future__ import annotations

import io
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from ... import faults
from ...handler import get_handler
from ...usage import Billing
from ..lifecycle import Response, sdk_field, stop_with
from ..raw import _loads

__all__ = ["wrapper"]

_get = sdk_field
OPENAI, ANTHROPIC = "openai.batch", "anthropic.batch"  # the once-namespaces of their rows
_BATCH = ("processing", "batch")  # genai-prices' batch price variant
_SOURCES_MAX = 1024  # files and batches remembered as read to their end, per handler
_MAX_LINE = 64 * 1024 * 1024  # bytes of one streamed output line kept until its end


# -- what a row says -------------------------------------------------------------------------
def batched(billing: Billing | None) -> Billing:
    """A row's billing at batch prices: the batch context in place of a service tier."""
    context = dict(billing.context) if billing is not None else {}
    context.pop("service_tier", None)
    context[_BATCH[0]] = _BATCH[1]
    return Billing(tuple(sorted(context.items())), billing.units if billing is not None else ())


def _openai_readers() -> dict[str, tuple[str, Callable[[Any], Response]]]:
    """The body's ``object`` -> (operation, the openai capture's reader of that body)."""
    from . import openai as sdk

    return {
        "chat.completion": ("chat", sdk.chat_response),
        "response": ("chat", sdk.responses_response),
        "list": ("embeddings", sdk.embeddings_response),
        "text_completion": ("text_completion", sdk.completions_response),
    }


def openai_row(line: Any, readers: dict[str, Any]) -> tuple[str, Response] | None:
    """(operation, answer) of one output line billed with usage; None for any other line
    (an error, a failed request, a body without usage)."""
    if type(line) is not dict:
        return None
    response = line.get("response")
    if type(response) is not dict or type(body := response.get("body")) is not dict:
        return None
    status = response.get("status_code")
    found = readers.get(body.get("object"))
    if found is None or type(status) is not int or not 200 <= status < 300:
        return None
    operation, read = found
    answer = read(body)
    if answer.usage is None and not answer.parts:
        return None
    row_id = line.get("id")
    if not answer.response_id and isinstance(row_id, str) and row_id:
        answer = answer._replace(response_id=row_id)  # an embeddings body has no id
    return operation, answer


def anthropic_row(row: Any) -> Response | None:
    """The answer of one ``succeeded`` result row; None for any other."""
    from ..wire.anthropic import messages_response as _messages_response

    result = _get(row, "result")
    if _get(result, "type") != "succeeded":
        return None
    message = _get(result, "message")
    if message is None:
        return None
    answer = _messages_response(message)
    return answer if answer.usage is not None or answer.parts else None


# -- one row, one call -----------------------------------------------------------------------
def record(
    once: str, operation: str, client: tuple[str, str | None, int | None], answer: Response
) -> None:
    """One billed row as one call, unless its response was counted before."""
    handler = get_handler()
    if answer.response_id and handler.counted_before(once, answer.response_id):
        return
    provider, address, port = client
    model = answer.model if isinstance(answer.model, str) else None
    try:  # spent already: over an enforced budget it is still recorded, never refused
        call = handler.start(
            operation=operation,
            provider=provider,
            request_model=model,
            server_address=address,
            server_port=port,
            spent=True,
        )
    except Exception as exc:
        faults.report("internal", exc)
        return
    stop_with(call, answer._replace(billing=batched(answer.billing)), once=once)


class _Sources:
    """Files and batches read to their end, per handler (a new handler forgets them): read
    again, their rows are passed by without a look."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_handler: weakref.WeakKeyDictionary[Any, OrderedDict] = weakref.WeakKeyDictionary()

    def _known(self) -> OrderedDict:
        handler = get_handler()
        known = self._by_handler.get(handler)
        if known is None:
            known = self._by_handler[handler] = OrderedDict()
        return known

    def seen(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._known()

    def add(self, key: tuple[str, str]) -> None:
        with self._lock:
            known = self._known()
            known[key] = None
            if len(known) > _SOURCES_MAX:
                known.popitem(last=False)


sources = _Sources()


# -- OpenAI: a batch's output file, read whole by the SDK or streamed -----------------------------
def _body(result: Any) -> bytes | None:
    """The file's bytes as the SDK read them (None: not read, e.g. a streamed response)."""
    if isinstance(result, str):  # retrieve_content
        return result.encode("utf-8", "replace")
    response = getattr(result, "response", None) or getattr(result, "http_response", None)
    content = getattr(response, "_content", None)  # read already: never read here
    return content if isinstance(content, bytes) else None


class _FileRows:
    """An output file's lines, each billed row recorded as it is read; a file whose first
    line is not an output line (an input file, an image) is left there."""

    def __init__(self, instance: Any, file_id: Any) -> None:
        from .openai import _client

        self.client, self.readers = _client(instance), _openai_readers()
        self.source = (OPENAI, file_id) if isinstance(file_id, str) else None
        self.done = self.source is not None and sources.seen(self.source)  # read whole before
        self.tail = b""  # a streamed line not complete yet
        self.decoder: Any = None  # the content encoding's, for streamed bytes as sent
        self._lock = threading.Lock()
        self._ended = False

    def line(self, raw: bytes) -> None:
        """One line of the file (never raises)."""
        if self.done or not raw.strip():
            return
        try:
            line = _loads(raw)
        except ValueError:
            line = None
        if type(line) is not dict or "custom_id" not in line or "response" not in line:
            self.done = True  # not a batch's output file
            return
        try:
            found = openai_row(line, self.readers)
        except ValueError as exc:  # counts that are not token counts: this row only
            faults.report("usage_invalid", exc)
            return
        if found is not None:
            record(OPENAI, found[0], self.client, found[1])

    def whole(self, content: bytes) -> None:
        """The file read whole by the SDK: every line, one at a time."""
        if content.lstrip()[:1] != b"{":
            return
        for raw in io.BytesIO(content):
            if self.done:
                return
            self.line(raw)
        self.end("exhausted")

    def feed(self, chunk: bytes) -> None:
        """Streamed bytes as the caller's read passes them (the stream tee's reader)."""
        if self.done:
            return
        try:
            data = self.tail + (_joined(self.decoder.decode(chunk)) if self.decoder else chunk)
            *lines, self.tail = data.split(b"\n")
            if len(self.tail) > _MAX_LINE:
                faults.report("parse", detail="a batch output line too long to read")
                self.done, self.tail = True, b""
        except Exception as exc:
            faults.report("parse", exc)
            self.done = True
            return
        for raw in lines:
            self.line(raw)

    def end(self, how: str, error: BaseException | None = None) -> None:
        """The file ended ``how`` (the tee's endings); read to its end, its last line is read
        and the file remembered as read whole. Once."""
        with self._lock:
            ended, self._ended = self._ended, True
        if ended or how != "exhausted" or error is not None:
            self.done = True
            return
        try:
            rest = _joined(self.decoder.flush()) if self.decoder is not None else b""
        except Exception as exc:
            faults.report("parse", exc)
            rest = b""
        self.line(self.tail + rest)
        self.done, self.tail = True, b""
        if self.source is not None:
            sources.add(self.source)


def _joined(decoded: Any) -> bytes:
    """A decoder's output: bytes (httpx), or an iterator of bytes (httpx2)."""
    return decoded if isinstance(decoded, bytes) else b"".join(decoded)


def read_file(instance: Any, file_id: Any, result: Any) -> None:
    """Record every billed row of an output file the SDK returned: now when it read the file
    whole, else as the caller reads its stream (``with_streaming_response``)."""
    content = _body(result)
    if content is not None:
        if content:
            _FileRows(instance, file_id).whole(content)
        return
    response = getattr(result, "http_response", None)
    if response is None or getattr(response, "is_stream_consumed", True):
        return
    from ..http.layer import _decoder, _tee_class  # the HTTP layer's tee of a response's stream

    rows = _FileRows(instance, file_id)
    if rows.done:
        return
    package = type(response).__module__.partition(".")[0]  # httpx or httpx2
    rows.decoder = _decoder(package, response.headers)
    is_async = type(result).__name__.startswith("Async")
    response.stream = _tee_class(package, is_async)(response.stream, rows)


def _passing(after: Callable[[Any, tuple, dict, Any], None], is_async: bool) -> Callable[..., Any]:
    """A wrapt wrapper handing the method's result back unchanged, ``after(instance, args,
    kwargs, result)`` run on it first (its faults counted, never raised)."""

    def guarded(instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
        try:
            after(instance, args, kwargs, result)
        except Exception as exc:
            faults.report("internal", exc)

    def wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        result = wrapped(*args, **kwargs)
        guarded(instance, args, kwargs, result)
        return result

    async def run(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        result = await wrapped(*args, **kwargs)
        guarded(instance, args, kwargs, result)
        return result

    def async_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        return run(wrapped, instance, args, kwargs)

    return async_wrapper if is_async else wrapper


def _content(instance: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """``files.content``/``retrieve_content`` returned: its rows read."""
    read_file(instance, args[0] if args else kwargs.get("file_id"), result)


# -- Anthropic: a batch's results, decoded lazily by the SDK ------------------------------------
class _Rows:
    """What a results decoder's rows are recorded against: the batch, its client, whether
    it was read to its end before."""

    def __init__(self, instance: Any, batch_id: Any) -> None:
        from .anthropic import _endpoint

        self.client = _endpoint(instance)
        self.source = (ANTHROPIC, batch_id) if isinstance(batch_id, str) else None
        self.skip = self.source is not None and sources.seen(self.source)

    def row(self, item: Any) -> None:
        """One row the caller got: recorded when it is billed (never raises)."""
        if self.skip:
            return
        try:
            answer = anthropic_row(item)
            if answer is not None:
                record(ANTHROPIC, "chat", self.client, answer)
        except ValueError as exc:
            faults.report("usage_invalid", exc)
        except Exception as exc:
            faults.report("internal", exc)

    def end(self) -> None:
        if self.source is not None and not self.skip:
            sources.add(self.source)


def _rows(inner: Iterator[Any], rows: _Rows) -> Iterator[Any]:
    for item in inner:
        rows.row(item)
        yield item
    rows.end()


async def _async_rows(inner: Any, rows: _Rows) -> Any:
    async for item in inner:
        rows.row(item)
        yield item
    rows.end()


def observe(decoder: Any, instance: Any, batch_id: Any, is_async: bool) -> None:
    """Record the decoder's rows as the caller iterates it: its row iterator (the SDK's
    ``_iterator``, made on first use) replaced by one passing each row on unchanged."""
    inner = decoder._iterator
    rows = _Rows(instance, batch_id)
    decoder._iterator = _async_rows(inner, rows) if is_async else _rows(inner, rows)


def _results(is_async: bool) -> Callable[[Any, tuple, dict, Any], None]:
    """``messages.batches.results`` returned the SDK's decoder: its rows recorded as read."""

    def after(instance: Any, args: tuple, kwargs: dict, decoder: Any) -> None:
        batch_id = args[0] if args else kwargs.get("message_batch_id")
        observe(decoder, instance, batch_id, is_async)

    return after


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of ``files.content`` (``"content"``) or ``batches.results``
    (``"results"``): installed by :mod:`.openai_patches` and :mod:`.anthropic_patches`."""
    return _passing(_content if name == "content" else _results(is_async), is_async)
