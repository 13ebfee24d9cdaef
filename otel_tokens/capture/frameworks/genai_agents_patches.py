"""Agent names from spans that follow OpenTelemetry's GenAI agent conventions, whoever made them.

A model call made while an ``invoke_agent {name}`` span is current, or is an ancestor in the
same trace within the process, is recorded under that span's ``gen_ai.agent.name`` (the
innermost agent span), in its ``gen_ai.conversation.id`` (the nearest agent span saying one)
when the call has none. Microsoft Agent Framework, Semantic Kernel, Google ADK, Strands,
AutoGen and any future framework describing its agents this way are covered with no code of
their own, when their telemetry is on; an ``otel_tokens.agent(...)`` binding still wins, and
a framework's own run context (its ``*_patches`` reader) is asked first.

The SDK keeps no link from a span to its parent span object, so a span processor remembers,
for each open span inside an agent span, the innermost agent span around it (bounded; dropped
when the span ends). It is added to an SDK ``TracerProvider`` once another library can make
spans there: when a tracer of another scope than otel_tokens' own is obtained from it (the
SDK's ``get_tracer`` is patched), and at install to the global provider if it has handed one
out already (an SDK before 1.41 keeps no list of its tracers: then at once). An application
where nothing else traces pays nothing here per call: no processor on its provider, no agent
source asked. Once a processor is added, a span outside agent spans costs one name test at its
start, a call one context-variable read and a dict look-up, and a span of a provider not
watched (its tracer obtained before install) is still read when it is itself the current agent
span. otel_tokens' own spans (scope ``otel_tokens``) are never agent spans here.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any, Callable

from ...account.agents import FrameworkRun, add_framework_source, remove_framework_source
from ..patching import Backend, SdkPatches

__all__ = [
    "BACKEND",
    "DEPENDENCIES",
    "AgentSpans",
    "current_run",
    "install",
    "traced_by_others",
    "uninstall",
    "watch",
]

BACKEND = Backend(
    "GenAIAgentSpansInstrumentor",
    "Agent names from any span following the GenAI agent conventions (invoke_agent).",
    requirements=("opentelemetry-sdk >= 1.27",),
    extra=None,
    apis=(),
)
DEPENDENCIES: tuple[str, ...] = BACKEND.requirements
OPERATION, INVOKE_AGENT = "gen_ai.operation.name", "invoke_agent"
AGENT_NAME, CONVERSATION = "gen_ai.agent.name", "gen_ai.conversation.id"
_OWN_SCOPE = "otel_tokens"  # otel_tokens.emit.instruments.SCOPE (not imported: start-up cost)
MAX_TRACKED = 10_000  # open spans remembered inside agent spans; past it the oldest is forgotten
_MAX_HOPS = 16  # agent spans walked outward for a conversation id


def is_agent_span(span: Any) -> bool:
    """True for a GenAI ``invoke_agent`` span (by its operation or its conventional name)
    that otel_tokens did not make."""
    scope = getattr(getattr(span, "instrumentation_scope", None), "name", None)
    if scope == _OWN_SCOPE:  # first: every model call's own span is one of these
        return False
    name = getattr(span, "name", None)
    if isinstance(name, str) and name.startswith(INVOKE_AGENT):
        return True
    attributes = getattr(span, "attributes", None)
    return bool(attributes) and attributes.get(OPERATION) == INVOKE_AGENT


class AgentSpans:
    """A span processor (the SDK's ``SpanProcessor`` interface) remembering, for each open span
    at or inside an agent span, the innermost agent span around it, keyed by span id."""

    def __init__(self) -> None:
        self.enclosing: dict[int, Any] = {}
        self.active = True

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        try:
            if not self.active:
                return
            enclosing = self.enclosing
            if not enclosing:  # outside any agent span, a model call's own span is none
                scope = getattr(span, "instrumentation_scope", None)
                if scope is not None and scope.name == _OWN_SCOPE:
                    return  # (the common case, with no call of is_agent_span)
            if is_agent_span(span):
                agent = span
            else:
                enclosing = self.enclosing
                parent = span.parent if enclosing else None
                agent = enclosing.get(parent.span_id) if parent is not None else None
                if agent is None:
                    return
            enclosing = self.enclosing
            if len(enclosing) >= MAX_TRACKED:  # spans never ended: forget the oldest
                enclosing.pop(next(iter(enclosing), None), None)
            enclosing[span.context.span_id] = agent
        except Exception:  # a span processor must never raise into the tracer (nor count per span)
            return

    def _on_ending(self, span: Any) -> None:
        pass

    def on_end(self, span: Any) -> None:
        if self.enclosing:
            try:
                self.enclosing.pop(span.context.span_id, None)
            except Exception:
                return

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def outer(self, agent: Any) -> Any:
        """The agent span enclosing agent span ``agent``, or None."""
        parent = getattr(agent, "parent", None)
        return self.enclosing.get(parent.span_id) if parent is not None else None


_SPANS = AgentSpans()
_watched: weakref.WeakSet[Any] = weakref.WeakSet()  # the providers _SPANS is added to
_watch_lock = threading.Lock()  # guards _watched and the agent source's registration


def _after_fork_in_child() -> None:
    global _watch_lock
    _watch_lock = threading.Lock()  # a fork while another thread held it must not leave it held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def watch(provider: Any) -> None:
    """Add the processor to an SDK ``TracerProvider`` (once; others have no processors), and
    read agent spans from then on (the SDK cannot remove a processor: it stays)."""
    add = getattr(provider, "add_span_processor", None)
    if add is None:
        return
    with _watch_lock:
        if provider in _watched:
            return
        _watched.add(provider)
    add(_SPANS)
    with _watch_lock:
        if _SPANS.active:
            add_framework_source(current_run, fallback=True)


def traced_by_others(provider: Any) -> bool:
    """True when ``provider`` has handed out a tracer of another scope than otel_tokens', or
    cannot say (an SDK before 1.41 keeps no list of its tracers; not an SDK provider)."""
    tracers = getattr(provider, "_tracers", None)  # SDK >= 1.41: scope -> tracer, each one made
    if not isinstance(tracers, dict):
        return True
    try:
        scopes = tuple(tracers)
    except RuntimeError:  # another thread added one while it was read
        return True
    return any(getattr(scope, "name", None) != _OWN_SCOPE for scope in scopes)


def _on_tracer(_: bool) -> Callable[..., Any]:
    """The wrapper of ``TracerProvider.get_tracer``: a tracer of another scope than otel_tokens'
    means spans otel_tokens did not make may come from this provider: watch it."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        tracer = wrapped(*args, **kwargs)
        try:
            scope = args[0] if args else kwargs.get("instrumenting_module_name")
            if scope != _OWN_SCOPE and instance not in _watched:
                watch(instance)
        except Exception as exc:
            from ... import faults

            faults.report("internal", exc)
        return tracer

    return wrapper


def _agent_name(span: Any) -> str | None:
    name = (getattr(span, "attributes", None) or {}).get(AGENT_NAME)
    if isinstance(name, str) and name.strip():
        return name
    title = getattr(span, "name", None)  # "invoke_agent {gen_ai.agent.name}"
    if not isinstance(title, str) or not title.startswith(INVOKE_AGENT):
        return None
    return title[len(INVOKE_AGENT) :].strip() or None


def _conversation(agent: Any) -> str | None:
    for _ in range(_MAX_HOPS):
        if agent is None:
            return None
        value = (getattr(agent, "attributes", None) or {}).get(CONVERSATION)
        if isinstance(value, str) and value.strip():
            return value
        agent = _SPANS.outer(agent)
    return None


def current_run() -> FrameworkRun | None:
    """The innermost GenAI agent span around the current span: its agent name and the nearest
    conversation id; None outside any agent span."""
    trace = sys.modules.get("opentelemetry.trace")
    span = trace.get_current_span() if trace is not None else None
    if span is None or span is trace.INVALID_SPAN:  # no span current: the common case
        return None
    enclosing = _SPANS.enclosing
    agent = enclosing.get(span.get_span_context().span_id) if enclosing else None
    if agent is None:
        if not is_agent_span(span):  # a span of a provider not watched is read if it is one
            return None
        agent = span
    name, conversation = _agent_name(agent), _conversation(agent)
    if name is None and conversation is None:
        return None
    return FrameworkRun(name, conversation)


_PROVIDERS = SdkPatches(
    "opentelemetry", [("opentelemetry.sdk.trace", "TracerProvider", "get_tracer", _on_tracer)]
)


def install(**_: Any) -> bool:
    """Read agent names from GenAI agent spans of every SDK provider another library traces
    with: the global one if it already does, any other once it hands out a tracer."""
    with _watch_lock:
        _SPANS.active = True
        if len(_watched):  # installed before: its processors are still on their providers
            add_framework_source(current_run, fallback=True)
    _PROVIDERS.install()  # first: a tracer obtained from now on is seen by the patch
    trace = sys.modules.get("opentelemetry.trace")
    if trace is not None:
        provider = trace.get_tracer_provider()
        if traced_by_others(provider):
            watch(provider)
    return True


def uninstall() -> None:
    """Stop reading agent spans (the processor stays on its providers, inert: the SDK has no
    way to remove one)."""
    with _watch_lock:
        _SPANS.active = False
        remove_framework_source(current_run)
    _PROVIDERS.uninstall()
    _SPANS.enclosing.clear()
