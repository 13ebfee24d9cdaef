"""``Request``: what a call's request contains that costs input tokens (a capture fact).

Instrumentors describe a request with one, in the API's own shapes; the pre-call estimate
reads it. Kept in its own module: both capture and the account step use it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .usage import check_token_count

__all__ = ["Api", "Request", "output_limit"]

#: the request's shape, named by the backend that describes it (its ``BACKEND.apis``):
#: ``openai_chat``, ``openai_responses``, ``openai_embeddings``, ``openai_completions``,
#: ``anthropic_messages``, ``gemini_contents``, ``bedrock_converse``; each is rendered for
#: the estimate by its format's renderer (``account/estimate/renderers/``: a new one there)
Api = str


class Request(NamedTuple):
    """The parts of a request that cost input tokens, in the API's own shapes (what the
    pre-call estimate reads).

    ``messages``: chat messages (OpenAI chat), input items or a string (Responses),
    messages (Anthropic), contents (Gemini), Converse messages (Bedrock), or prompts and inputs (legacy completions,
    embeddings); ``system``: Anthropic's ``system`` or Responses' ``instructions``;
    ``tools``: tool/function definitions sent with the request; ``response_format``: a
    structured-output schema (it is shown to the model, so it costs input tokens);
    ``thinking``: Anthropic extended thinking enabled; ``max_output_tokens``: the most output
    tokens the request allows (its ``max_tokens``, in the API's spelling; None: it says none),
    read once by :func:`output_limit` (the fleet budget reserves it before the call);
    ``tool_choice``: the request's tool choice as sent (Anthropic's forced choices are billed
    more system text than ``auto``); ``reasoning_mode``: Responses ``reasoning.mode``, whose
    added context the request does not show (the estimate is incomplete).

    (A named tuple: immutable, built and read by field name.)
    """

    api: Api
    model: str | None = None
    messages: Any = ()
    system: Any = None
    tools: Any = ()
    response_format: Any = None
    thinking: bool = False
    chained: str | None = None  # Responses ``previous_response_id``: earlier turns on the server
    max_output_tokens: int | None = None
    tool_choice: Any = None  # Anthropic ``tool_choice``: a forced tool adds system text
    reasoning_mode: str | None = None  # Responses ``reasoning.mode`` (e.g. "pro")


def output_limit(*values: Any) -> int | None:
    """The request's output limit: the first of ``values`` (the API's spellings, in order of
    precedence, SDK "not given" sentinels already read as None) that is given, as a token count
    by the one coercion rule of :func:`~otel_tokens.usage.check_token_count`; a value that is
    not one (a string, a fraction, a negative, a boolean) counts as absent, so the documented
    default applies."""
    for value in values:
        if value is None:
            continue
        try:
            return check_token_count("max_tokens", value)
        except ValueError:
            return None
    return None
