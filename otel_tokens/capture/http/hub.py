"""huggingface_hub's ``InferenceClient.text_generation`` (and ``AsyncInferenceClient``'s): the
request it sends is marked as text generation while it runs (:data:`..wire.tgi.asked`).

Called with a prompt alone, it posts ``{"inputs": ..., "parameters": {}}``, the body
summarization and classification post to the same path; the HTTP layer records it from the
bytes as any TGI answer (:mod:`..wire.tgi`), once this mark tells it the task."""

from __future__ import annotations

from typing import Any, Callable

from ..wire.tgi import asked

__all__ = ["wrapper"]


def _marked(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    token = asked.set(True)
    try:
        return wrapped(*args, **kwargs)
    finally:
        asked.reset(token)


def _amarked(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
    async def run() -> Any:
        token = asked.set(True)
        try:
            return await wrapped(*args, **kwargs)
        finally:
            asked.reset(token)

    return run()


def wrapper(name: str, is_async: bool) -> Callable[..., Any]:
    """The wrapt wrapper of ``text_generation`` (the patch table installs it)."""
    return _amarked if is_async else _marked
