"""Provider SDKs read above the HTTP layer: their own objects, raw and streaming paths, and
what only the SDK knows (Azure deployments, Bedrock's operations, litellm's routing). One
``<sdk>_patches`` module each (what ``instrument()`` installs) beside its per-call module.
"""
