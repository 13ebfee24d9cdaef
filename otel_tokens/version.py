"""The package version (its own module, so that no module needs ``otel_tokens/__init__``)."""

__version__ = "0.1.0"
