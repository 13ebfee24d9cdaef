"""Any ``module:Class.method`` named in ``OTEL_TOKENS_BACKENDS`` or passed to
:func:`~otel_tokens.instrument_backend`: wrapped, and its result parsed as an agent run.
"""
