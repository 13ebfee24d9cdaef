"""One agent-CLI run (an :class:`~.parsers.AgentRun`) as a call record.

Shared by the subprocess instrumentor and ``instrument_backend``: one ``invoke_agent {cli}``
call per run, usage per model as the call's parts, the CLI's own cost and premium requests,
and the ``otel_tokens.cli.*`` attributes. Argument values and output text are recorded only
when content capture is on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
"""

from __future__ import annotations

import contextvars
import re
from typing import Any, Sequence

from ... import faults
from ...call import Call
from ...handler import get_handler
from .parsers import AgentRun

__all__ = ["PROVIDERS", "flag_names", "last_agent_run", "report_run", "start_run"]

#: CLI -> ``gen_ai.provider.name`` of the models it drives by default.
PROVIDERS: dict[str, str] = {
    "copilot": "github_copilot",
    "claude": "anthropic",
    "codex": "openai",
    "gemini": "gcp.gemini",
}

CLI_NAME = "otel_tokens.cli.name"
CLI_EXECUTABLE = "otel_tokens.cli.executable"
CLI_FLAGS = "otel_tokens.cli.flags"
CLI_ARGV = "otel_tokens.cli.argv"  # content capture only
CLI_OUTPUT_TEXT = "otel_tokens.cli.output_text"  # content capture only
CLI_EXIT_CODE = "otel_tokens.cli.exit_code"
CLI_OUTPUT_FORMAT = "otel_tokens.cli.output_format"
CLI_TOOL_CALLS = "otel_tokens.cli.tool_calls"
CLI_MODEL_CALLS = "otel_tokens.cli.model_calls"
CLI_TURNS = "otel_tokens.cli.turns"
CLI_DURATION_MS = "otel_tokens.cli.duration_ms"
CLI_API_DURATION_MS = "otel_tokens.cli.api_duration_ms"
CLI_MODELS = "otel_tokens.cli.models"
CLI_PARSE_ERRORS = "otel_tokens.cli.parse_errors"
CLI_NOTICES = "otel_tokens.cli.notices"
CLI_OUTPUT_REWRITTEN = "otel_tokens.cli.output_rewritten"
CLI_USAGE_FILE = "otel_tokens.cli.usage_file"
CONVERSATION_ID = "gen_ai.conversation.id"

_FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9_.-]*$")
_TEXT_LIMIT = 16_384
_last_run: contextvars.ContextVar[AgentRun | None] = contextvars.ContextVar(
    "otel_tokens_last_agent_run", default=None
)


def flag_names(argv: Sequence[str]) -> tuple[str, ...]:
    """The flag names of a command line (``--model=x`` -> ``--model``), never their values."""
    out = []
    for arg in argv[1:]:
        name = arg.split("=", 1)[0]
        if _FLAG.match(name):
            out.append(name)
    return tuple(out)


def start_run(
    cli: str,
    executable: str | None = None,
    argv: Sequence[str] | None = None,
    attributes: dict[str, Any] | None = None,
    request_model: str | None = None,
) -> Call:
    """Open the ``invoke_agent {cli}`` call (its span starts now); ``request_model``: the
    model the command line (or the CLI's own configuration) asks for, when it names one."""
    handler = get_handler()
    attrs: dict[str, Any] = {CLI_NAME: cli}
    if executable:
        attrs[CLI_EXECUTABLE] = executable
    if argv is not None:
        attrs[CLI_FLAGS] = flag_names(argv)
        if handler.settings.capture_content:
            attrs[CLI_ARGV] = tuple(argv)
    if attributes:
        attrs.update(attributes)
    return handler.start(
        operation="invoke_agent",
        provider=PROVIDERS.get(cli, cli),
        request_model=request_model,
        span_name=f"invoke_agent {cli}",
        attributes=attrs,
    )


def _error_type(run: AgentRun) -> str:
    """A low-cardinality ``error.type`` for a failed run (the message stays off metrics): the
    parser's kind (an HTTP status, ``truncated_output``, ...), else ``exit_code``."""
    if run.error_type:
        return run.error_type
    return "exit_code" if run.exit_code not in (None, 0) else "agent_error"


def report_run(
    call: Call,
    run: AgentRun | None,
    *,
    exception: BaseException | None = None,
    attributes: dict[str, Any] | None = None,
) -> None:
    """End ``call`` with what ``run`` says (or as failed with ``exception``); never raises."""
    try:
        attrs: dict[str, Any] = dict(attributes or {})
        if run is None:
            call.fail(exception if exception is not None else "no_output", attributes=attrs)
            return
        _last_run.set(run)
        for _ in range(run.parse_errors):
            faults.report("parse", None, f"{run.cli}: unreadable output")
        optional = {
            CLI_EXIT_CODE: run.exit_code,
            CLI_TOOL_CALLS: run.tool_calls,
            CLI_MODEL_CALLS: run.model_calls,
            CLI_TURNS: run.turns,
            CLI_DURATION_MS: run.duration_ms,
            CLI_API_DURATION_MS: run.api_duration_ms,
            CONVERSATION_ID: run.session_id,
        }
        attrs.update({k: v for k, v in optional.items() if v is not None})
        attrs[CLI_OUTPUT_FORMAT] = run.output_format
        attrs[CLI_PARSE_ERRORS] = run.parse_errors
        if run.models:
            attrs[CLI_MODELS] = run.models
        if run.notices:
            attrs[CLI_NOTICES] = len(run.notices)
        if get_handler().settings.capture_content and run.text:
            attrs[CLI_OUTPUT_TEXT] = run.text[:_TEXT_LIMIT]
        total = run.total
        parts = list(run.usage) if len(run.usage) > 1 else None
        model = run.usage[0].model if len(run.usage) == 1 else run.model if not run.usage else None
        if run.cumulative and run.session_id:
            call.cumulative_key = f"{run.cli}:{run.session_id}"
        # a run cut before its result reports its input but not its output: estimated from text
        text = (
            run.text
            if total is not None
            and total.input_tokens is not None
            and (total.output_tokens is None)
            else None
        )
        if exception is not None or run.failed:
            error: BaseException | str = exception if exception is not None else _error_type(run)
            call.fail(
                error, total, response_model=model, attributes=attrs, parts=parts, output_text=text
            )
        else:
            call.stop(total, response_model=model, attributes=attrs, parts=parts, output_text=text)
    except Exception as exc:
        faults.report("internal", exc)
        try:
            call.fail("internal")
        except Exception:
            pass


def last_agent_run() -> AgentRun | None:
    """The last agent-CLI run reported in this thread or task (e.g. after
    ``subprocess.run``), with its raw output on ``.raw``."""
    return _last_run.get()
