"""The pre-call estimate on the peer corpus, measured two ways, as rows of (file, endpoint,
categories, signed error against the billed input, whether the estimate said complete):

* :func:`direct`: the capture readers build each request from its recorded body and one
  estimator per recording estimates it and learns from the response, as the account step does;
* :func:`replayed`: each recording replayed through the real ``openai``/``anthropic`` clients
  with otel_tokens installed, one handler (one process) per recording, and the estimate read
  from the span (``otel_tokens.estimate.input_tokens``): the product's own figures.

Each recording is its own process: the corpus's anonymized Responses ids repeat across files.
"""

from __future__ import annotations

import json
import statistics
import warnings
from collections import defaultdict
from typing import Iterable, NamedTuple

from otel_tokens.account.estimate import Estimator
from otel_tokens.capture.sdk import anthropic as anthropic_sdk
from otel_tokens.capture.sdk import openai as openai_sdk

from .. import peer

READERS = {
    "openai chat": (openai_sdk.chat_request, "openai"),
    "openai responses": (openai_sdk.responses_request, "openai"),
    "anthropic messages": (anthropic_sdk.messages_request, "anthropic"),
}
_IMAGES = ('"image_url"', '"input_image"', '"type": "image"', "data:image")
_FILES = ('"input_audio"', '"input_file"', '"type": "document"', '"file_id"', "data:audio",
          "application/pdf", '"type": "file"')  # fmt: skip
_TOOLS = ('"tool_call_id"', '"function_call_output"', '"tool_result"', '"tool_use"', '"tool_calls"')
CATEGORIES = ("all", "text", "tools", "reasoning models", "images", "audio, PDF, files",
              "chained (previous_response_id)")  # fmt: skip


class Row(NamedTuple):
    file: str
    endpoint: str
    categories: frozenset[str]
    error: float  # (estimate - billed) / billed
    complete: bool
    billed: int = 0
    estimate: int = 0
    bound: int | None = None  # otel_tokens.estimate.input_tokens_max (replayed: the span's)


def categories(body: dict) -> frozenset[str]:
    text = json.dumps(body)
    found = {"all"}
    if any(m in text for m in _IMAGES):
        found.add("images")
    if any(m in text for m in _FILES):
        found.add("audio, PDF, files")
    if body.get("tools") or body.get("functions") or any(t in text for t in _TOOLS):
        found.add("tools")
    if not found - {"all"}:
        found.add("text")
    model = str(body.get("model") or "")
    reasoning = body.get("reasoning") or body.get("thinking")
    if model.startswith(("o1", "o3", "o4", "gpt-5")) or reasoning:
        found.add("reasoning models")
    if body.get("previous_response_id"):
        found.add("chained (previous_response_id)")
    return frozenset(found)


def by_file(folders: Iterable[str] | None = None) -> dict[str, list[peer.Truth]]:
    """The corpus's interactions per recording, in order (only ``folders`` when given)."""
    files: dict[str, list[peer.Truth]] = defaultdict(list)
    for truth in peer.truths():
        if folders is None or truth.folder in folders:
            files[truth.path.as_posix()].append(truth)
    return {path: sorted(truths, key=lambda t: t.index) for path, truths in files.items()}


def _billed(truth: peer.Truth) -> int | None:
    return (truth.usage or {}).get("input") if truth.status == 200 else None


def _response_id(interaction) -> str | None:  # type: ignore[no-untyped-def]
    try:
        return json.loads(interaction.response_text).get("id")
    except (ValueError, AttributeError):
        return None  # a stream: its id is in the events


def direct(files: dict[str, list[peer.Truth]]) -> list[Row]:
    """Rows of the estimator driven directly (the readers on the recorded bodies)."""
    rows = []
    for path, truths in files.items():
        calls = [(peer.interaction(t), t.endpoint, _billed(t), (t.usage or {}).get("output"))
                 for t in truths]  # fmt: skip
        rows.extend(estimate_calls(path, calls))
    return rows


def estimate_calls(path: str, calls: list[tuple],  # type: ignore[type-arg]
                   estimator: Estimator | None = None) -> list[Row]:  # fmt: skip
    """Rows of one recording's calls, each (interaction, endpoint, billed input or None,
    output or None), estimated in order by one estimator that learns as the calls go (a new
    one, as in one process per recording, unless ``estimator`` is given), as the account
    step does."""
    rows = []
    estimator = estimator or Estimator()
    for interaction, endpoint, billed, output in calls:
        body = interaction.request_body
        if endpoint not in READERS or not isinstance(body, dict):
            continue
        reader, provider = READERS[endpoint]
        estimate = estimator.estimate(reader(body), provider=provider)
        if not billed:
            continue
        error = (estimate.estimate.input_tokens - billed) / billed
        rows.append(Row(path, endpoint, categories(body), error, estimate.complete,
                        billed, estimate.estimate.input_tokens, estimate.input_max))  # fmt: skip
        estimator.observe(estimate, billed)
        response_id = _response_id(interaction)
        if endpoint == "openai responses" and response_id:
            estimator.remember(response_id, billed + (output or 0))
    return rows


def replayed(files: dict[str, list[peer.Truth]]) -> list[Row]:
    """Rows of the product: each recording replayed through the real clients, one handler
    per recording, the estimate read from each call's span."""
    from otel_tokens.handler import set_handler

    from ..sdk import drive
    from ..telemetry.conftest import make_telemetry

    rows = []
    for path, truths in files.items():
        telemetry = make_telemetry()
        previous = set_handler(telemetry.handler)
        openai_sdk.install()
        anthropic_sdk.install()
        try:
            for truth in truths:
                row = _replay_one(path, truth, telemetry, drive)
                if row is not None:
                    rows.append(row)
        finally:
            openai_sdk.uninstall()
            anthropic_sdk.uninstall()
            set_handler(previous)
    return rows


def _replay_one(path, truth, telemetry, drive) -> Row | None:  # type: ignore[no-untyped-def]
    interaction = peer.interaction(truth)
    target = drive.target(interaction)
    if target is None:
        return None
    before = len(telemetry.finished())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # retired models in old recordings
        warnings.simplefilter("ignore", UserWarning)
        try:
            drive.run(interaction, "plain", False, target)
        except Exception:  # an error response: the client raises it, as it should
            pass
    spans = telemetry.finished()[before:]
    body = interaction.request_body
    billed = _billed(truth)
    if truth.endpoint not in READERS or not isinstance(body, dict) or not billed or not spans:
        return None
    attributes = spans[-1].attributes
    estimate = attributes.get("otel_tokens.estimate.input_tokens")
    if estimate is None:
        return None
    complete = attributes.get("otel_tokens.estimate.complete", True)
    return Row(path, truth.endpoint, categories(body), (estimate - billed) / billed, bool(complete),
               billed, estimate, attributes.get("otel_tokens.estimate.input_tokens_max"))  # fmt: skip


def figures(errors: list[float]) -> tuple[int, float, float]:
    """(n, median |error|, p90 |error|)."""
    ordered = sorted(abs(e) for e in errors)
    if not ordered:
        return 0, 0.0, 0.0
    return len(ordered), statistics.median(ordered), ordered[int(0.9 * (len(ordered) - 1))]


def table(rows: list[Row]) -> dict[str, tuple[int, float, float]]:
    """Figures by category, then by endpoint."""
    out = {name: figures([r.error for r in rows if name in r.categories]) for name in CATEGORIES}
    for endpoint in READERS:
        out[endpoint] = figures([r.error for r in rows if r.endpoint == endpoint])
    return out


def render(title: str, figures_by_name: dict[str, tuple[int, float, float]]) -> str:
    lines = [title]
    for name, (n, median, p90) in figures_by_name.items():
        lines.append(f"  {name:32s} n={n:4d}  median {100 * median:5.1f}%  p90 {100 * p90:6.1f}%")
    return "\n".join(lines)


def spread(rows: list[Row], floor: int = 256) -> dict[str, float]:
    """Issue 48's figures over the rows of ``floor`` billed input tokens or more: how many,
    the share within 0.5x-2x of the billed input, how many above 2x, above 3x and below
    0.5x, the largest estimate/billed ratio, the share that say complete, and the median and
    p90 |error| of those that do and of those that do not; how many incomplete ones carry
    a bound, how many bounds hold the billed input, how many billed inputs lie between the
    estimate and its bound, and the median bound/billed (how wide)."""
    rows = [r for r in rows if r.billed >= floor]
    ratios = [1 + r.error for r in rows]
    complete = [r.error for r in rows if r.complete]
    incomplete = [r.error for r in rows if not r.complete]
    n = len(rows) or 1
    _, c_median, c_p90 = figures(complete)
    _, i_median, i_p90 = figures(incomplete)
    widths = [r.bound / r.billed for r in rows if r.bound is not None and not r.complete]
    return {
        "n": len(rows), "within 0.5x-2x": sum(0.5 <= q <= 2 for q in ratios) / n,
        "above 2x": sum(q > 2 for q in ratios), "above 3x": sum(q > 3 for q in ratios),
        "below 0.5x": sum(q < 0.5 for q in ratios), "max ratio": max(ratios, default=0.0),
        "complete share": len(complete) / n, "complete median": c_median,
        "complete p90": c_p90, "incomplete median": i_median, "incomplete p90": i_p90,
        "incomplete bounded": sum(r.bound is not None for r in rows if not r.complete),
        "bound >= billed": sum(r.bound is not None and r.bound >= r.billed for r in rows),
        "in [estimate, bound]": sum(r.bound is not None and r.estimate <= r.billed <= r.bound
                                    for r in rows if not r.complete),
        "bound/billed p50": statistics.median(widths) if widths else 0.0,
    }  # fmt: skip


def render_spread(title: str, found: dict[str, float]) -> str:
    """One line per figure of :func:`spread`."""
    lines = [title]
    for name, value in found.items():
        ratio = name in ("max ratio", "bound/billed p50")
        shown = f"{100 * value:.1f}%" if isinstance(value, float) and not ratio \
            else f"{value:.2f}x" if ratio else str(value)  # fmt: skip
        lines.append(f"  {name:18s} {shown}")
    return "\n".join(lines)
