"""Wire formats: what a model API's requests and answers look like on the wire, one module
each, shared by every client that speaks it (the HTTP layer, :mod:`..http.layer`).

A format module names the POST paths it answers (:data:`Wire` per path suffix) and reads the
request's JSON body (model, output limit, what the estimate reads), a whole answer's JSON into
a :class:`~otel_tokens.capture.lifecycle.Response`, and stream events (decoded JSON, one at a
time) with an :class:`~otel_tokens.capture.stream.Accumulator`. Where an SDK capture reads the
same format, its dict-capable readers are the one parser (openai, anthropic, google-genai).
The stream framings (server-sent events, NDJSON) are in :mod:`.framing`.

Adding a wire format: one module here with ``SUFFIXES`` and ``recognise(path)``, listed in
:mod:`.formats`, and its tests (the shape: :mod:`.base`). A path other formats or tasks share
(TGI's ``/`` and ``/models/{id}``) is told by its body (``Wire.accepts``); counts an answer
gives in its headers are read by ``Wire.headers``.
"""
