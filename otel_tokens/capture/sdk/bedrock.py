"""AWS Bedrock through boto3/botocore: ``bedrock-runtime`` ``converse``, ``converse_stream``,
``invoke_model`` and ``invoke_model_with_response_stream``.

botocore builds every client method at run time, so the one place all of them pass is
``BaseClient._make_api_call(operation_name, params)``; calls of other services and
operations go straight through. Usage, as genai-prices' own Bedrock extractor reads it:

* Converse: ``usage`` with input = ``inputTokens`` + ``cacheReadInputTokens`` +
  ``cacheWriteInputTokens`` (those two also as cache read and write), output =
  ``outputTokens``; 1-hour cache writes (``cacheDetails``) are billed units; streams carry it
  in their ``metadata`` event;
* InvokeModel: the ``x-amzn-bedrock-*-token-count`` response headers; without them the
  model family's body when the caller reads it (Anthropic ``usage``, ``usage`` in Converse's
  shape for Nova, ``prompt_token_count``/``generation_token_count`` for Llama);
* InvokeModelWithResponseStream: each chunk is the model family's own event; the last one
  carries ``amazon-bedrock-invocationMetrics`` (the billed counts), which wins.

Streams and bodies are read only as the caller reads them (the event stream through the one
stream proxy). The model is the request's ``modelId`` (inference-profile prefixes and ARNs
are resolved for pricing by genai-prices); ``error.type`` is the HTTP status of a refused
call (``429``, ``503``).
"""

from __future__ import annotations

import json
import weakref
from typing import Any, Callable

import wrapt

from ... import faults
from ...call import Call
from ...endpoints import server_of
from ...request import Request, output_limit
from ...usage import Billing, Usage, check_token_text
from ..lifecycle import open_call, sdk_field, sync_wrapper, unusable
from ..sent import check_converse, rejected
from ..stream import STREAM_END, Accumulator, wrap_stream

__all__ = ["wrapper"]

_get = sdk_field
PROVIDER = "aws.bedrock"
#: the operations recorded -> whether they stream
_STREAMED = {
    "Converse": False,
    "ConverseStream": True,
    "InvokeModel": False,
    "InvokeModelWithResponseStream": True,
}


# -- usage ---------------------------------------------------------------------------------
def converse_usage(usage: Any) -> Usage | None:
    """Converse's ``usage`` (and Nova's body): cache classes inside input."""
    if not isinstance(usage, dict):
        return None
    fresh, read, write = (
        usage.get("inputTokens"),
        usage.get("cacheReadInputTokens"),
        usage.get("cacheWriteInputTokens"),
    )
    inp = fresh if fresh is None or (read is None and write is None) else _add(fresh, read, write)
    return Usage(
        input_tokens=inp,
        output_tokens=usage.get("outputTokens"),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def _add(*values: Any) -> Any:
    """A sum of token counts (absent: 0); a value that is not a count goes through for the
    usage record to reject."""
    total = 0
    for value in values:
        if value is None:
            continue
        if type(value) is not int:
            return value
        total += value
    return total


def converse_billing(usage: Any) -> Billing | None:
    """1-hour cache writes (``cacheDetails`` by TTL) billed at their own rate."""
    details = usage.get("cacheDetails") if isinstance(usage, dict) else None
    units = {}
    for entry in details or ():
        ttl = _get(entry, "ttl")
        if ttl in ("5m", "1h"):
            units[f"cache_write_{ttl}_tokens"] = _get(entry, "inputTokens")
    return Billing.of(None, units) if units.get("cache_write_1h_tokens") else None


_HEADERS = (
    "x-amzn-bedrock-input-token-count",
    "x-amzn-bedrock-output-token-count",
    "x-amzn-bedrock-cache-read-input-token-count",
    "x-amzn-bedrock-cache-write-input-token-count",
)


def _header_usage(result: Any) -> Usage | None:
    """InvokeModel's token-count headers (None when the response has none)."""
    headers = _get(_get(result, "ResponseMetadata"), "HTTPHeaders") or {}
    values = [headers.get(name) for name in _HEADERS]
    if values[0] is None and values[1] is None:
        return None
    try:
        fresh, out, read, write = (check_token_text(name, v) for name, v in zip(_HEADERS, values))
    except ValueError as exc:
        faults.report("usage_invalid", exc)
        return Usage()
    return converse_usage(
        {
            "inputTokens": fresh,
            "outputTokens": out,
            "cacheReadInputTokens": read,
            "cacheWriteInputTokens": write,
        }
    )


def _body_usage(body: Any) -> tuple[Usage | None, Billing | None, tuple[str, ...]]:
    """(usage, billing, finish reasons) of an InvokeModel body of a known model family."""
    if not isinstance(body, dict):
        return None, None, ()
    usage = body.get("usage")
    if isinstance(usage, dict) and "input_tokens" in usage:  # Anthropic Messages
        from ..wire.anthropic import fields_billing, fields_usage, usage_fields

        fields = usage_fields(usage)
        found = fields_usage(fields, None, None)
        reason = body.get("stop_reason")
        return (
            (found.replace(provider=None) if found else None),
            fields_billing(fields),
            ((str(reason),) if reason else ()),
        )
    if isinstance(usage, dict):  # Nova: Converse's shape
        reason = body.get("stopReason")
        return converse_usage(usage), converse_billing(usage), ((str(reason),) if reason else ())
    if "prompt_token_count" in body or "generation_token_count" in body:  # Llama
        reason = body.get("stop_reason")
        return (
            Usage(
                input_tokens=body.get("prompt_token_count"),
                output_tokens=body.get("generation_token_count"),
            ),
            None,
            ((str(reason),) if reason else ()),
        )
    return None, None, ()


# -- requests ------------------------------------------------------------------------------
def _request(operation: str, params: dict[str, Any]) -> Request | None:
    """Converse messages, system and tools; an InvokeModel body in the Anthropic shape."""
    model = params.get("modelId")
    if operation.startswith("Converse"):
        tools = _get(params.get("toolConfig"), "tools") or ()
        return Request(
            "bedrock_converse",
            model,
            params.get("messages") or (),
            system=params.get("system"),
            tools=tools,
            max_output_tokens=output_limit(_get(params.get("inferenceConfig"), "maxTokens")),
        )
    body = params.get("body")
    try:
        payload = json.loads(body) if isinstance(body, (str, bytes, bytearray)) else None
    except ValueError:
        return None
    if isinstance(payload, dict) and isinstance(payload.get("messages"), list):
        return Request(
            "anthropic_messages",
            model,
            payload["messages"],
            system=payload.get("system"),
            tools=payload.get("tools") or (),
            max_output_tokens=output_limit(payload.get("max_tokens")),
        )
    return None


# -- streams -------------------------------------------------------------------------------
class _ConverseAccumulator(Accumulator):
    """ConverseStream events: text deltas, the stop reason, the ``metadata`` usage."""

    def add(self, event: Any) -> bool:
        if not isinstance(event, dict):
            return True
        delta = _get(event.get("contentBlockDelta"), "delta")
        if delta is not None:
            text = _get(delta, "text") or _get(_get(delta, "toolUse"), "input")
            if isinstance(text, str) and text:
                self.text.append(text)
        elif "messageStop" in event:
            reason = _get(event["messageStop"], "stopReason")
            if reason:
                self.finish_reasons = [str(reason)]
        elif "metadata" in event:
            usage = _get(event["metadata"], "usage")
            self.usage = converse_usage(usage)
            self.billing = converse_billing(usage)
        return True


class _ChunkAccumulator(Accumulator):
    """InvokeModelWithResponseStream chunks: the model family's events (Anthropic's read by
    its own accumulator), then Bedrock's ``amazon-bedrock-invocationMetrics``, which wins."""

    def __init__(self) -> None:
        super().__init__()
        from ..wire.anthropic import MessagesAccumulator as _MessagesAccumulator

        self._anthropic = _MessagesAccumulator()

    def add(self, event: Any) -> bool:
        data = _get(_get(event, "chunk"), "bytes") if isinstance(event, dict) else None
        if not data:
            return True
        try:
            payload = json.loads(data)
        except ValueError as exc:
            faults.report("parse", exc)
            return True
        if not isinstance(payload, dict):
            return True
        metrics = payload.get("amazon-bedrock-invocationMetrics")
        if "type" in payload:
            self._anthropic.add(payload)
            self.text, self.finish_reasons = self._anthropic.text, self._anthropic.finish_reasons
            found = self._anthropic.usage
            self.usage = (
                found.replace(provider=None, model=None) if found is not None else self.usage
            )
            self.billing = self._anthropic.billing
        if isinstance(metrics, dict):
            self.usage = converse_usage(
                {
                    "inputTokens": metrics.get("inputTokenCount"),
                    "outputTokens": metrics.get("outputTokenCount"),
                    "cacheReadInputTokens": metrics.get("cacheReadInputTokenCount"),
                    "cacheWriteInputTokens": metrics.get("cacheWriteInputTokenCount"),
                }
            )
        return True


class _Body(wrapt.ObjectProxy):  # type: ignore[misc]
    """InvokeModel's body without usage headers: read by the caller, then its usage taken
    from what was read. A body closed or dropped unread ends the call with its usage unknown;
    one cut short (its read raises) fails it."""

    def __init__(self, body: Any, call: Call) -> None:
        super().__init__(body)
        self._self_call = call
        self._self_read: list[bytes] = []
        self._self_finalizer = weakref.finalize(self, _unread, call, "abandoned")

    def read(self, *args: Any, **kwargs: Any) -> Any:
        call = self._self_call
        try:
            data = self.__wrapped__.read(*args, **kwargs)
        except BaseException as exc:
            self._self_finalizer.detach()
            call.fail(exc, attributes={STREAM_END: "error"})
            raise
        if not call.ended:
            if data:
                self._self_read.append(data)
            if not data or not (args or kwargs.get("amt")):  # the whole body, or its end
                self._self_finalizer.detach()
                _end_body(call, b"".join(self._self_read))
        return data

    def close(self) -> None:
        self._self_finalizer.detach()
        try:
            self.__wrapped__.close()
        finally:
            _unread(self._self_call, "closed")


def _unread(call: Call, how: str) -> None:
    """A body closed or dropped before it was read to its end: usage unknown."""
    if not call.ended:
        call.stop(None, attributes={STREAM_END: how})


def _end_body(call: Call, data: bytes) -> None:
    """End the call with the usage of the body read whole (unusable usage: rejected)."""
    try:
        try:
            body = json.loads(data) if data else None
        except ValueError:
            body = None
        usage, billing, reasons = _body_usage(body)
        call.stop(
            usage,
            finish_reasons=reasons or None,
            billing=billing,
            attributes={STREAM_END: "exhausted"},
        )
    except Exception as exc:
        unusable(call, exc)


# -- the call ------------------------------------------------------------------------------
def _server(instance: Any) -> tuple[str | None, int | None]:
    """(address, port) of the client's endpoint URL."""
    url = getattr(getattr(instance, "meta", None), "endpoint_url", None)
    return server_of(url) if isinstance(url, str) else (None, None)


def _failure(exc: BaseException) -> BaseException | str:
    """A refused call's HTTP status (botocore's ``ClientError`` is one class for all)."""
    status = _get(_get(getattr(exc, "response", None), "ResponseMetadata"), "HTTPStatusCode")
    return str(status) if type(status) is int and 400 <= status <= 599 else exc


def _open(instance: Any, args: tuple, kwargs: dict) -> tuple[Call, tuple, dict, str] | None:
    """Open the call of a ``bedrock-runtime`` operation (:data:`..lifecycle.Start`); None for
    any other AWS call, which goes straight through."""
    try:
        operation = args[0] if args else kwargs.get("operation_name")
        params = args[1] if len(args) > 1 else kwargs.get("api_params")
        if (
            operation not in _STREAMED
            or not isinstance(params, dict)
            or instance._service_model.service_name != "bedrock-runtime"
        ):
            return None
        model = params.get("modelId")
        address, port = _server(instance)
        if operation == "Converse":  # its usage as sent, before botocore's parser (see .sent)
            instance.meta.events.register(
                _AFTER_CONVERSE, check_converse, unique_id=_AFTER_CONVERSE
            )
    except Exception:
        return None
    call = open_call(
        lambda given: _request(operation, given),
        params,
        operation="chat",
        provider=PROVIDER,
        request_model=model if isinstance(model, str) else None,
        stream=_STREAMED[operation],
        server_address=address,
        server_port=port,
    )
    return None if call is None else (call, args, kwargs, operation)


_AFTER_CONVERSE = "after-call.bedrock-runtime.Converse"


def _read(call: Call, result: Any, operation: str) -> Any:
    """End the call from the response, or hand its stream or body to the caller wrapped."""
    response_id = _get(_get(result, "ResponseMetadata"), "RequestId")
    if operation == "Converse":
        usage = _get(result, "usage")
        reason = _get(result, "stopReason")
        exc = rejected(result)
        if exc is not None:  # a count botocore made an integer of: unusable as sent
            faults.report("usage_invalid", exc)
            usage = None
        call.stop(
            converse_usage(usage) if exc is None else Usage(),
            response_id=response_id,
            finish_reasons=(str(reason),) if reason else None,
            billing=converse_billing(usage),
        )
    elif operation == "ConverseStream":
        acc = _ConverseAccumulator()
        acc.response_id = response_id
        result["stream"] = wrap_stream(result["stream"], call, acc, False)
    elif operation == "InvokeModelWithResponseStream":
        acc = _ChunkAccumulator()
        acc.response_id = response_id
        result["body"] = wrap_stream(result["body"], call, acc, False)
    else:
        usage = _header_usage(result)
        if usage is not None:
            call.stop(usage, response_id=response_id)
        else:
            call.response_id = response_id
            result["body"] = _Body(result["body"], call)
    return result


#: the one path (:mod:`..lifecycle`) around ``BaseClient._make_api_call``
_API_CALL = sync_wrapper(_open, _read, _failure, sdk=True)


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of ``BaseClient._make_api_call`` (:mod:`.bedrock_patches`)."""
    return _API_CALL
