"""One stream proxy for every streaming backend: the caller cannot tell it from the original.

A ``wrapt.ObjectProxy`` around a provider's stream (iteration, context manager, ``close()``,
attributes such as ``response`` all pass through). Each item is shown to a provider-specific
:class:`Accumulator`, which keeps the running usage and text; or, where the accumulator reads
the items where the stream makes them (:meth:`Accumulator.made`, openai's chat completions:
each decoded chunk kept as made, read in bulk), the proxy only passes them on, noting the
first, leaving out the one it hides and asking the accumulator to read what was made every
:data:`BATCH` items (:meth:`Accumulator.read_made`), so what is kept stays small. Where the
stream's own ``__iter__`` only passes an iterator on (:meth:`Accumulator.items`), the proxy
reads that iterator itself: a generator layer fewer per item. Every ending ends the call
exactly once and clears the agent's estimate:

* ``exhausted``: the stream ran out;
* ``closed`` / ``exited``: closed, or its ``with`` block left, before the end;
* ``error``: an exception mid-stream (the call fails, usage that arrived is kept);
* ``abandoned``: dropped without being drained, found when it is garbage collected.

A stream that ends without reported output hands the text seen to the call record, whose
account step estimates the output from it (marked ``otel_tokens.usage.source = estimated``).
How it ended is the span attribute ``otel_tokens.stream.end``.
"""

from __future__ import annotations

import threading
import weakref
from itertools import islice
from typing import Any, AsyncIterator, Iterator, Sequence

import wrapt

from .. import faults
from ..call import Call
from ..usage import Billing, Usage
from .sent import HELD, Sent, inside_sdk, rejected

__all__ = [
    "Accumulator",
    "AsyncStreamProxy",
    "StreamObserver",
    "StreamProxy",
    "EMPTY_EVENT_STREAM",
    "not_an_event_stream",
    "wrap_stream",
]

STREAM_END = "otel_tokens.stream.end"
BATCH = 64  #: items a stream read where they are made passes on between two reads (read_made)
_NOTHING: Any = object()


class Accumulator:
    """What a provider reads from stream items; subclasses fill the fields in ``add``."""

    def __init__(self) -> None:
        self.usage: Usage | None = None  # the latest running/final usage reported
        self.model: str | None = None
        self.response_id: str | None = None
        self.finish_reasons: list[str] = []
        self.text: list[str] = []  # output text seen (for an output estimate)
        self.billing: Billing | None = None  # see otel_tokens.usage.Billing
        self.parts: tuple[Usage, ...] = ()  # usages billed apart (see capture.lifecycle.Response)
        self.pending = False  # the work goes on after the stream (see capture.lifecycle.Response)
        self.invalid = False  # the stream reported usage that is not token counts
        self.sent: Sent | None = None  # its events as sent, where they are read (see .sent)

    def add(self, item: Any) -> bool:
        """Read one item; return False to hide it from the caller (an injected usage chunk)."""
        return True

    def final_text(self) -> str:
        return "".join(self.text)

    def watch(self, stream: Any) -> None:
        """Look at the provider's stream object before it is read (e.g. its raw events)."""

    def made(self, stream: Any, observer: StreamObserver) -> bool:
        """Read the items of ``stream`` (not read yet) where it makes them, instead of in the
        proxy; True when so: the proxy then only passes them on (:meth:`StreamObserver.first`,
        ``observer.hidden``). False (the default): the proxy shows each item to :meth:`add`."""
        return False

    def first(self, item: Any) -> None:
        """The first item of a stream read where its items are made: what only it says."""

    def read_made(self, observer: StreamObserver) -> None:
        """Read the items made since the last read, where they are made (:meth:`made`): the
        proxy asks every :data:`BATCH` items, and the end once, so what is kept stays small."""

    def items(self, stream: Any) -> Any:
        """The iterator ``stream``'s own ``__iter__``/``__aiter__`` only passes on, to be
        read directly (a generator layer fewer per item), or None."""
        return None

    def end_call(
        self,
        call: Call,
        how: str,
        error: BaseException | str | None = None,
        once: str | None = None,
    ) -> None:
        """End ``call`` with what the stream said; ``how`` it ended (``otel_tokens.stream.end``)."""
        sent = self.sent
        if sent is not None and sent.error is not None and not self.invalid:
            faults.report("usage_invalid", sent.error)  # an event's usage, as sent, broke the rule
            self.invalid = True
        usage = self.usage
        # no reported output: the text seen, for the account step to estimate it from
        # (nothing arrived: nothing to estimate; unusable usage is unknown, not estimated)
        text = None
        if self.invalid:
            usage, self.parts, self.billing = Usage(), (), None
        elif (usage is None or usage.output_tokens is None) and call.first_chunk_at is not None:
            text = self.final_text()
        attributes = {STREAM_END: how}
        if self.parts:
            usage = None
        if error is not None:
            call.fail(
                error,
                usage,
                response_model=self.model,
                response_id=self.response_id,
                attributes=attributes,
                output_text=text,
                parts=self.parts or None,
                billing=self.billing,
            )
        else:
            call.stop(
                usage,
                response_model=self.model,
                response_id=self.response_id,
                finish_reasons=self.finish_reasons or None,
                attributes=attributes,
                output_text=text,
                parts=self.parts or None,
                billing=self.billing,
                once=once,
                pending=self.pending,
            )


class StreamObserver:
    """The capture side of one stream, shared by the sync and async proxies."""

    __slots__ = (
        "call",
        "acc",
        "once",
        "made",
        "hidden",
        "passed",
        "_lock",
        "_ended",
        "__weakref__",
    )

    def __init__(self, call: Call, acc: Accumulator, once: str | None = None) -> None:
        self.call = call
        self.acc = acc
        self.once = once  # see capture.lifecycle.Operation
        self.made = False  # its items are read where the stream makes them (Accumulator.made)
        self.hidden: list[Any] = []  # there, the items to hide from the caller (one at most)
        self.passed = 0  # there, items passed on one at a time (``__next__``) since a read
        self._lock = threading.Lock()
        self._ended = False

    def item(self, item: Any) -> bool:
        """One item: first-chunk time, accumulation; never raises into the caller."""
        try:
            acc = self.acc
            if self.call.first_chunk_at is None:
                self.call.first_chunk()
            before = acc.usage
            show = acc.add(item)
            if HELD:  # an item's usage, as sent, broke the rule (see .sent)
                exc = rejected(item)
                if exc is not None:
                    faults.report("usage_invalid", exc)
                    acc.invalid = True
                    return show
            usage = acc.usage
            if usage is not before and usage is not None:
                sent = acc.sent
                if sent is not None and sent.error is not None:  # its usage, as sent, broke
                    return show  # the rule: not shown as the call's running usage (end_call)
                self.call.stream_usage(usage)
            return show
        except ValueError as exc:  # usage values that are not token counts: the usage is unknown
            faults.report("usage_invalid", exc)
            self.acc.invalid = True
            return True
        except Exception as exc:
            faults.report("parse", exc)
            return True

    def first(self, item: Any) -> None:
        """The first item of a stream read where its items are made: first-chunk time."""
        try:
            self.call.first_chunk()
            self.acc.first(item)
        except Exception as exc:
            faults.report("parse", exc)

    def shown(self, item: Any) -> bool:
        """An item read where it was made (one at a time, ``__next__``): False to hide it."""
        if self.call.first_chunk_at is None:
            self.first(item)
        self.passed += 1
        if self.passed >= BATCH:
            self.passed = 0
            self.read()
        hidden = self.hidden
        return not hidden or item is not hidden[-1]

    def read(self) -> None:
        """The items made since the last read, read (:meth:`Accumulator.read_made`)."""
        try:
            self.acc.read_made(self)
        except Exception as exc:
            faults.report("parse", exc)

    def end(self, how: str, error: BaseException | str | None = None) -> None:
        """End the call once, whichever ending comes first."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        if self.made:
            self.read()
        try:
            self.acc.end_call(self.call, how, error, self.once)
        except Exception as exc:
            faults.report("internal", exc)
            if not self.call.ended:  # the call still ends, once, whatever went wrong above
                if error is not None:
                    self.call.fail(error)
                else:
                    self.call.stop(None)


def _reset(token: Any) -> None:
    """Undo :data:`inside_sdk`'s setting (a caller that runs each step of an asynchronous
    stream in a context of its own cannot: it was set there, and goes with it)."""
    try:
        inside_sdk.reset(token)
    except ValueError:
        pass


def _within_sdk(step: Any) -> Any:
    """``step()`` with :data:`inside_sdk` set: an HTTP request it sends is the stream's own."""
    token = inside_sdk.set(True)
    try:
        return step()
    finally:
        _reset(token)


async def _awithin_sdk(step: Any) -> Any:
    """``await step()`` with :data:`inside_sdk` set (see :func:`_within_sdk`)."""
    token = inside_sdk.set(True)
    try:
        return await step()
    finally:
        _reset(token)


def _first(iterator: Iterator[Any]) -> Any:
    """The first item of a stream (:data:`_NOTHING`: none), obtained with :data:`inside_sdk`
    set: a stream that sends its request at its first read (google-genai's, litellm's for
    some providers) is counted by its SDK capture, not again by the HTTP layer."""
    return _within_sdk(lambda: next(iterator, _NOTHING))


async def _afirst(iterator: AsyncIterator[Any]) -> Any:
    """The first item of an asynchronous stream, as :func:`_first`."""
    try:
        return await _awithin_sdk(iterator.__anext__)
    except StopAsyncIteration:
        return _NOTHING


class _ProxyBase(wrapt.ObjectProxy):  # type: ignore[misc]
    def __init__(self, wrapped: Any, observer: StreamObserver) -> None:
        super().__init__(wrapped)
        self._self_observer = observer
        # a stream dropped without being drained still ends its call, once collected
        self._self_finalizer = weakref.finalize(self, observer.end, "abandoned")

    def _self_end(self, how: str, error: BaseException | str | None = None) -> None:
        self._self_finalizer.detach()
        observer = self._self_observer
        if how == "exhausted" and observer.call.first_chunk_at is None:
            error, how = not_an_event_stream(self.__wrapped__), "error"
        observer.end(how, error)


class StreamProxy(_ProxyBase):
    """A synchronous stream (``openai.Stream``, ``anthropic.Stream``)."""

    def __iter__(self) -> Iterator[Any]:
        # like the SDKs' own ``__iter__``, a generator over the stream (a ``for`` loop then
        # resumes a generator per item instead of calling a Python ``__next__`` from C)
        return self._self_iterate()

    def _self_iterate(self) -> Iterator[Any]:
        observer = self._self_observer
        iterator = observer.acc.items(self.__wrapped__) or self.__wrapped__.__iter__()
        try:
            value = _first(iterator)  # the SDK's own (a lazily sent request too), see .sent
            if value is _NOTHING:
                pass
            elif not observer.made:
                item = observer.item
                if item(value):
                    yield value
                for value in iterator:
                    if item(value):
                        yield value
            else:  # read where they were made: passed on, the hidden one left out; the
                hidden = observer.hidden  # first, noted, on its own (no test per item),
                observer.first(value)  # then BATCH at a time (islice), read after each
                if not hidden or value is not hidden[-1]:
                    yield value
                while True:
                    value = _NOTHING
                    for value in islice(iterator, BATCH):
                        if not hidden or value is not hidden[-1]:
                            yield value
                    if value is _NOTHING:
                        break
                    observer.read()
        except GeneratorExit:  # the caller stopped this loop (break): not an ending
            raise
        except BaseException as exc:
            self._self_end("error", exc)
            raise
        self._self_end("exhausted")

    def __next__(self) -> Any:
        wrapped, observer = self.__wrapped__, self._self_observer
        item = observer.shown if observer.made else observer.item
        while True:
            try:
                if observer.call.first_chunk_at is None:  # the SDK's own request, see _first
                    value = _within_sdk(wrapped.__next__)
                else:
                    value = wrapped.__next__()
            except StopIteration:
                self._self_end("exhausted")
                raise
            except BaseException as exc:
                self._self_end("error", exc)
                raise
            if item(value):
                return value

    def __enter__(self) -> StreamProxy:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_end("error" if exc is not None else "exited", exc)

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_end("closed")


class AsyncStreamProxy(_ProxyBase):
    """An asynchronous stream (``openai.AsyncStream``, ``anthropic.AsyncStream``)."""

    def __aiter__(self) -> AsyncIterator[Any]:
        # an asynchronous generator, like the SDKs' own ``__aiter__`` (no coroutine per item)
        return self._self_aiterate()

    async def _self_aiterate(self) -> AsyncIterator[Any]:
        observer = self._self_observer
        iterator = observer.acc.items(self.__wrapped__) or self.__wrapped__.__aiter__()
        try:
            value = await _afirst(iterator)  # the SDK's own (a lazily sent request too)
            if value is _NOTHING:
                pass
            elif not observer.made:
                item = observer.item
                if item(value):
                    yield value
                async for value in iterator:
                    if item(value):
                        yield value
            else:  # as _self_iterate (items counted: no islice for an asynchronous iterator)
                hidden, passed = observer.hidden, 0
                observer.first(value)
                if not hidden or value is not hidden[-1]:
                    yield value
                async for value in iterator:
                    if not hidden or value is not hidden[-1]:
                        yield value
                    passed += 1
                    if passed == BATCH:
                        passed = 0
                        observer.read()
        except GeneratorExit:  # the caller stopped this loop (break): not an ending
            raise
        except BaseException as exc:
            self._self_end("error", exc)
            raise
        self._self_end("exhausted")

    async def __anext__(self) -> Any:
        observer = self._self_observer
        item = observer.shown if observer.made else observer.item
        while True:
            try:
                if observer.call.first_chunk_at is None:  # the SDK's own request, see _first
                    value = await _awithin_sdk(self.__wrapped__.__anext__)
                else:
                    value = await self.__wrapped__.__anext__()
            except StopAsyncIteration:
                self._self_end("exhausted")
                raise
            except BaseException as exc:
                self._self_end("error", exc)
                raise
            if item(value):
                return value

    async def __aenter__(self) -> AsyncStreamProxy:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_end("error" if exc is not None else "exited", exc)

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_end("closed")


NOT_AN_EVENT_STREAM = "not_an_event_stream"  #: error.type of a "stream" that was something else
EMPTY_EVENT_STREAM = "empty_event_stream"  #: error.type of a stream that ended without an event


def not_an_event_stream(stream: Any) -> str:
    """The error of a stream that ended without one event: an error, never a 0-token answer.
    Its body was not an event stream (an HTML proxy page, a JSON error with status 200), or
    was one that held no event at all (a proxy that closed it at once)."""
    response = getattr(stream, "response", None)
    kind = getattr(getattr(response, "headers", None), "get", lambda *_: None)("content-type") or ""
    if response is None or "event-stream" in kind:
        faults.report("parse", detail="a stream ended without a single event")
        return EMPTY_EVENT_STREAM
    faults.report(
        "parse",
        detail=f"a stream answered {kind or 'without a content type'}, not server-sent events",
    )
    return NOT_AN_EVENT_STREAM


def wrap_stream(
    stream: Any, call: Call, acc: Accumulator, is_async: bool, once: str | None = None
) -> Any:
    """``stream`` wrapped in the stream proxy, its items shown to ``acc``."""
    acc.watch(stream)
    observer = StreamObserver(call, acc, once)
    observer.made = acc.made(stream, observer)
    return (AsyncStreamProxy if is_async else StreamProxy)(stream, observer)


def finish_reasons(values: Sequence[Any]) -> list[str]:
    """Non-empty finish reasons as strings."""
    return [str(v) for v in values if v]
