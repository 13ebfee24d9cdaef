"""Every interaction of the peer corpus that carries usage, replayed through the real client
as a new user's traffic would be: recorded exactly and priced at the full bill.

``../shared/fixtures/peer-cassettes`` holds other projects' real recorded OpenAI/Anthropic
traffic; its README gives each interaction's true usage. Each one is made again through the
real ``openai``/``anthropic`` client (chat, Responses, legacy completions, embeddings,
transcriptions, Messages, Assistants runs; streamed or not), and must yield one span whose
tokens by class equal the truth (0 where the API sent 0, absent where it sent nothing), with
the response id and model, and whose cost equals the provider's bill computed independently
(:mod:`.bill`; Anthropic compaction and advisor iterations billed on top of the message).
The test prints a one-line score (the README quotes it).
"""

from __future__ import annotations

import collections
import warnings

from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import peer
from ..telemetry.conftest import handling
from . import bill, drive
from .replay import major

#: where the corpus README's row and the recorded body disagree, the body wins: the README
#: lists no output for this transcription, whose recorded usage says ``"output_tokens": 5``
README_DIFFERS = {
    "logfire/tests__otel_integrations__test_openai_agents__test_voice_pipeline.yaml#0": {"output": 5},
}


def _replayed(truth: peer.Truth):
    it = peer.interaction(truth)
    target = drive.target(it)
    assert target is not None, f"{truth.key}: no SDK method for {it.method} {it.uri}"
    with handling(openai_sdk, anthropic_sdk) as telemetry, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # retired models in old recordings
        warnings.simplefilter("ignore", UserWarning)  # base64 embeddings dumped by pydantic
        drive.run(it, "plain", False, target)  # streams read to their end: no collection needed
    return it, telemetry


def _check(truth: peer.Truth) -> str:
    """``priced`` or ``unpriced`` when the replay records the truth and the bill (the model has
    a price, or none anywhere); else what differs."""
    it, telemetry = _replayed(truth)
    spans = telemetry.finished()
    if len(spans) != 1:
        return f"{len(spans)} spans"
    attributes = spans[0].attributes
    want = {**truth.usage, **README_DIFFERS.get(truth.key, {})}
    for cls, extra in bill.apart_tokens(it).items():  # compaction and advisor iterations, on top
        if extra:
            want[cls] = (want[cls] or 0) + extra
    wrong = {cls: (attributes.get(attr), want[cls]) for cls, attr in peer.ATTRIBUTES.items()
             if attributes.get(attr) != want[cls]}  # fmt: skip
    if wrong:
        return f"tokens (got, true): {wrong}"
    if truth.response_model and attributes.get("gen_ai.response.model") != truth.response_model:
        return f"response model {attributes.get('gen_ai.response.model')} != {truth.response_model}"
    has_id = truth.endpoint not in ("openai embeddings", "openai audio/transcriptions")  # their bodies carry none
    if has_id and not attributes.get("gen_ai.response.id"):
        return "no response id"
    expected = bill.full_bill(it, truth.endpoint, attributes.get("gen_ai.request.model"))
    cost = attributes.get("otel_tokens.cost.usd")
    if expected is None:
        unpriced = telemetry.points("otel_tokens.unpriced_requests")
        return "unpriced" if cost is None and unpriced else f"cost {cost} for a model with no price"
    if cost is None or abs(cost - expected) > 1e-12 + 1e-9 * expected:
        return f"cost {cost} != the bill {expected}"
    return "priced"


def test_every_interaction_with_usage_is_recorded_exactly_and_priced_at_the_full_bill(capsys):
    peer.require()
    rows = [t for t in peer.truths() if t.usage]
    failures = {}
    endpoints: collections.Counter[str] = collections.Counter()
    unpriced = 0
    for truth in rows:
        endpoints[truth.endpoint.split("/")[0].replace("openai threads", "openai runs")] += 1
        result = _check(truth)
        if result == "unpriced":
            unpriced += 1
        elif result != "priced":
            failures[truth.key] = result
    import anthropic
    import openai

    exact = len(rows) - len(failures)
    by_endpoint = ", ".join(f"{n} {name}" for name, n in endpoints.most_common())
    with capsys.disabled():
        print(f"\npeer corpus (openai {openai.__version__}, anthropic {anthropic.__version__}): "
              f"{exact}/{len(rows)} interactions with usage recorded exactly and priced at the "
              f"full bill ({exact - unpriced} priced, {unpriced} of models genai-prices has no "
              f"price for, counted as unpriced); {by_endpoint}")  # fmt: skip
    assert not failures, failures
    assert major("openai") >= 1 and len(rows) > 400
