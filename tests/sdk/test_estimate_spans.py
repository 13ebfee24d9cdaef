"""The estimate on the span, through the real client: a Responses call chained to a response
this process recorded carries that response's context in its estimate; chained to one it did
not record, the estimate says it is incomplete (``otel_tokens.estimate.complete=false``)."""

from __future__ import annotations

from .test_full_bill import MESSAGE, openai_client, response, responses_usage, served, telemetry  # noqa: F401


def test_a_chain_this_process_recorded_is_in_the_estimate(telemetry):  # noqa: F811
    first = {**response("gpt-4.1", [MESSAGE], responses_usage(1500, 400)), "id": "resp_first"}
    second = {**response("gpt-4.1", [MESSAGE], responses_usage(1930, 20)), "id": "resp_second"}
    orphan = {**response("gpt-4.1", [MESSAGE], responses_usage(700, 20)), "id": "resp_orphan"}
    client, _ = openai_client(served(first, second, orphan))
    client.responses.create(model="gpt-4.1", input="Plan the migration. " * 100)
    client.responses.create(model="gpt-4.1", input="Go on.", previous_response_id="resp_first")
    client.responses.create(model="gpt-4.1", input="Go on.", previous_response_id="resp_unseen")
    _, chained, unknown = (s.attributes for s in telemetry.finished())
    assert chained["otel_tokens.estimate.input_tokens"] >= 1900  # 1500 in + 400 out, then the new turn
    assert "otel_tokens.estimate.complete" not in chained
    assert unknown["otel_tokens.estimate.complete"] is False
