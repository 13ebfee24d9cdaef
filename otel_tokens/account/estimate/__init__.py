"""Input-token estimates of requests before and while they stream, measured against actuals.

The three RFC 00040 sources, the best available picked automatically, in this order:

* ``delta``: the agent's last *reported* input tokens plus an estimate of only what was
  appended since (when the request extends the previous one of the same agent and model):
  authoritative for most of the prompt, and cheap however long the conversation grows;
* ``exact``: tiktoken counts the whole rendered request (OpenAI models, once the encoding is
  loaded: see :mod:`.text`);
* ``full``: the heuristic over the whole request.

Heuristic parts are corrected per model by a bounded running ratio of actual/estimate learnt
from completed calls (the calibration, reported on the span). No provider SDK is imported.

Plain chat messages (a role and a text: a conversation's history, resent every turn) are kept
by content with what counting them takes (:class:`_Kept`): a request of them is counted by
sums, to the same figure as its texts joined and counted, without rendering it again.
"""

from __future__ import annotations

import struct
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from ...request import Api, Request
from ..state import Estimate
from .text import (
    JOINER_TOKENS,
    LOADED,
    NEWLINE_MASK,
    WEIGHTS,
    encoding_for,
    exact_tokens,
    heuristic_features,
    heuristic_tokens,
    warm_up,
)

if TYPE_CHECKING:
    from .requests import Rendering

__all__ = ["Api", "Estimator", "Request", "RequestEstimate", "count_text", "warm_up"]

_CALIBRATION_WINDOW = 50
_RATIO_BOUNDS = (0.5, 2.0)
_MAX_KEYS = 1024  # models with a calibration, (agent, provider, model) cursors: the oldest go first
_JOINER = "\n"
_SEQUENCES = (list, tuple)  # messages as the common case gives them
_MAX_PER_PART = 100_000  # tokens one part of unknown size is learnt at, at most
_MAX_RANGE = 1000.0  # the largest actual/estimate ratio an incomplete estimate's bound learns
#: an incomplete estimate's bound while its model has learnt none for its kind: (the estimate
#: times, tokens added per part of unknown size); chosen, not fitted (docs/estimates.md
#: gives how often each holds the billed input): the largest image a model bills (patch
#: models: 2,500), a few PDF pages, a tool search loading at most twice what it is sent,
#: about two rounds of web-search results for any other server-run tools (or a mix)
_DEFAULT_BOUNDS = {
    "image": (1.0, 2_500),
    "file": (1.0, 3_000),
    "tool_search": (3.0, 0),
    "server": (1.0, 32_000),
    "incomplete": (2.0, 0),
}
_MIN_LEARNT = 5  # calls a model's learnt bound of a kind needs to go below the default
_SEARCH_TOOLS = ("tool_search", "namespace")  # server tools that load tool definitions only


def count_text(text: str, model: str | None = None) -> int:
    """Tokens of ``text``: exact for an OpenAI model whose encoding is loaded, else heuristic."""
    encoding = encoding_for(model)
    return exact_tokens(encoding, text) if encoding is not None else heuristic_tokens(text)


def _count(rendering: Rendering, encoding: Any) -> tuple[int, int]:
    """(tokens counted from texts, tokens known without a tokenizer)."""
    texts = list(filter(None, rendering.texts))  # the non-empty ones
    if not texts:
        return 0, rendering.fixed
    joined = _JOINER.join(texts)
    if encoding is not None:
        return exact_tokens(encoding, joined) - (len(texts) - 1), rendering.fixed
    counted = heuristic_tokens(joined) - round((len(texts) - 1) * JOINER_TOKENS)
    return max(counted, 1), rendering.fixed


class RequestEstimate(NamedTuple):
    """An estimate and what the estimator needs to learn from the call's actual usage.

    (A named tuple: immutable.)
    """

    estimate: Estimate
    calibration: float | None  # the ratio applied to heuristic counts (None: none applied)
    model: str | None
    cursor_key: tuple[Any, ...]
    n_messages: int
    last_digest: int | None
    preamble_digest: int
    heuristic_raw: int  # heuristic-counted tokens before calibration (0 when exact/delta)
    fixed: int
    complete: bool = True  # False: media of unknown size, or server-side turns not known
    carried: int = 0  # reasoning of the current turn counted in (dropped at the next user turn)
    #: parts of unknown size: (kind, how many, tokens counted for them), learnt from on observe
    guessed: tuple[str, int, int] | None = None
    server_tools: bool = False  # the server may run tools: the reported input sums its rounds
    #: an incomplete estimate's upper bound: the estimate times the largest actual/estimate
    #: ratio of the model's recent incomplete calls of the same kind (None: none learnt yet)
    input_max: int | None = None


class _Cursor(NamedTuple):
    n_messages: int
    last_digest: int | None
    preamble_digest: int
    reported_input: int
    carried: int


def _render_messages(
    renderer: Any, api: Api, messages: Any, model: str | None, total: Any = None
) -> tuple[Any, Any, bool]:
    """(the messages' rendering, added to ``total`` when given (the preamble's), the last
    message's, whether a user turn opens among them).

    Reasoning carried back (``Rendering.carried``) counts only after the last user turn:
    the APIs drop it from earlier turns. The total's ``carried`` is what was counted."""
    if total is None:
        total = renderer.Rendering()
    last = None
    pending = 0
    opened = False
    for message in messages:
        last = _render(renderer, api, message, model)
        if last.opens_turn:
            pending, opened = 0, True
        pending += last.carried
        total.add(last)
    total.fixed += pending
    total.carried = pending
    return total, last, opened


#: what is kept of plain chat messages (a role and a text: a conversation's history, resent
#: every turn), by content; bounded in entries and in the size of a text kept
_RENDERED_MAX, _RENDERED_TEXT_MAX = 512, 4096
_rendered: dict[tuple[str, str], _Kept] = {}
_FIELD = 64  # bits of one count packed in an int (never overflowed: 2^64 bytes)
_unpack = struct.Struct("<9Q").unpack  # the nine counts of a packed int, from its bytes
_PACKED_BYTES = 9 * _FIELD // 8
_NEWLINE_BITS = NEWLINE_MASK.bit_count()
_START, _CHARACTER_WEIGHTS, _PER_BYTE, _PER_BIT, _PER_SHARED_BIT = WEIGHTS


def _pack(*values: int) -> int:
    """Non-negative integers in one int, ``_FIELD`` bits each: packed ones add field by field."""
    return sum(value << (_FIELD * i) for i, value in enumerate(values))


class _Kept:
    """A plain chat message's rendering, its digest and what counting it takes, kept so that a
    request of kept messages is counted by sums (:func:`_measure`), not rendered and counted.

    ``packed``: the heuristic's features of its texts joined (:func:`.text.heuristic_features`)
    with a joining newline after them and the bits the newlines share with its ends, then its
    number of texts, fixed tokens and whether it opens a turn; a request's are the sum of its
    messages' less the first's ``head`` and the last's ``tail`` (the joints it does not have).
    ``exact`` and ``last``: per tiktoken encoding, the tokens of its texts joined with a
    newline after them (as a message before another) and without (as the last). Exact counts
    add up when each message starts with an ASCII letter (its role): no pre-token of either
    encoding's pattern crosses a newline into a letter, so the joined request's tokens are the
    sum of its messages' (tests/estimate/test_kept.py holds them to it). ``alone``: per
    encoding (None: the heuristic), what a request of this message alone counts (a one-shot
    prompt, sent again and again), once counted."""

    __slots__ = (
        "alone",
        "digest",
        "exact",
        "head",
        "last",
        "packed",
        "rendering",
        "summable",
        "tail",
    )

    def __init__(self, rendering: Rendering) -> None:
        self.rendering = rendering
        self.digest = _digest(rendering)
        texts = list(filter(None, rendering.texts))
        joined = _JOINER.join(texts)
        start = joined[:1]
        self.summable = (
            start.isascii() and start.isalpha() and rendering.complete and not rendering.carried
        )
        if self.summable:
            nbytes, bits, shared, c2, c3, c4, first, last = heuristic_features(joined)
            head, tail = (first & NEWLINE_MASK).bit_count(), (last & NEWLINE_MASK).bit_count()
            self.packed = _pack(
                nbytes + 1,
                bits + _NEWLINE_BITS,
                shared + head + tail,
                c2,
                c3,
                c4,
                len(texts),
                rendering.fixed,
                rendering.opens_turn,
            )
            self.head, self.tail = _pack(0, 0, head), _pack(1, _NEWLINE_BITS, tail)
            self.exact: dict[Any, int] = {}  # one entry per encoding loaded, each
            self.last: dict[Any, int] = {}
            self.alone: dict[Any, tuple[int, int, bool]] = {}  # and one for the heuristic

    def count(self, encoding: Any, newline: bool) -> int:
        """Its tokens (in ``exact`` with a newline after its texts, else in ``last``), kept.
        After an ASCII letter or digit a newline is a token of its own: then one count is the
        other's, give or take that token (tiktoken runs once per message where it can)."""
        joined = _JOINER.join(filter(None, self.rendering.texts))
        table, other = (self.exact, self.last) if newline else (self.last, self.exact)
        known = other.get(encoding)
        end = joined[-1]
        if known is not None and end.isascii() and end.isalnum():
            tokens = known + 1 if newline else known - 1
        else:
            tokens = exact_tokens(encoding, joined + _JOINER if newline else joined)
        table[encoding] = tokens
        return tokens

    def count_alone(self, encoding: Any) -> tuple[int, int, bool]:
        """(tokens counted from texts, fixed tokens, whether a turn opens) of a request of
        this message alone, kept in ``alone``."""
        found = self.alone[encoding] = _summed(
            self.packed - self.head - self.tail, 0, self, encoding
        )
        return found


def _keep(renderer: Any, api: Api, message: dict[str, str], model: str | None) -> _Kept | None:
    """A plain chat message rendered and kept in :data:`_rendered` (None: too long to keep)."""
    role, content = message["role"], message["content"]
    if len(content) > _RENDERED_TEXT_MAX:
        return None
    kept = _Kept(renderer.render_message(api, message, model))
    if len(_rendered) >= _RENDERED_MAX:
        try:  # the oldest (another thread may have taken it)
            del _rendered[next(iter(_rendered))]
        except (KeyError, RuntimeError, StopIteration):
            pass
    _rendered[(role, content)] = kept
    return kept


def _kept(renderer: Any, api: Api, message: Any, model: str | None) -> _Kept | None:
    """What is kept of an OpenAI chat message of a role and a text alone (its rendering
    depends on nothing else), from :data:`_rendered` or kept now; None for other messages."""
    if api == "openai_chat" and type(message) is dict and len(message) == 2:
        role, content = message.get("role"), message.get("content")
        if type(role) is str and type(content) is str:
            return _rendered.get((role, content)) or _keep(renderer, api, message, model)
    return None


def _render(renderer: Any, api: Api, message: Any, model: str | None) -> Any:
    """``renderer.render_message``, kept for plain chat messages. Renderings are only read."""
    kept = _kept(renderer, api, message, model)
    return kept.rendering if kept is not None else renderer.render_message(api, message, model)


def _last_digest(renderer: Any, api: Api, message: Any, model: str | None) -> int:
    """The digest of ``message``'s rendering (kept with a plain chat message)."""
    kept = _kept(renderer, api, message, model)
    if kept is not None:
        return kept.digest
    return _digest(renderer.render_message(api, message, model))


def _digest(rendering: Rendering) -> int:  # noqa: F821 (imported lazily)
    return hash((tuple(rendering.texts), rendering.fixed))


#: ``round((texts - 1) * JOINER_TOKENS)`` for requests of up to 256 texts, made once
_JOINERS = tuple(round(i * JOINER_TOKENS) for i in range(256))


def _summed(features: int, exact: int, last: _Kept, encoding: Any) -> tuple[int, int, bool]:
    """(tokens counted from texts, fixed tokens, whether a turn opens) of kept messages: the
    sum of their packed features less the joints they do not have, ``exact`` the sum of their
    exact counts but the last's (``last``: the last message)."""
    nbytes, bits, shared, c2, c3, c4, texts, fixed, opened = _unpack(
        features.to_bytes(_PACKED_BYTES, "little")
    )
    if encoding is not None:
        exact += last.last.get(encoding) or last.count(encoding, False)
        return exact - (texts - 1), fixed, opened > 0
    # heuristic_tokens' sums of these features, in its order (the same floats)
    total = (
        _START + sum(c * w for c, w in zip((c2, c3, c4), _CHARACTER_WEIGHTS))
        if c2 or c3 or c4
        else _START
    )
    total += nbytes * _PER_BYTE + bits * _PER_BIT + shared * _PER_SHARED_BIT
    tokens = round(total)
    counted = (tokens if tokens > 0 else 1) - (
        _JOINERS[texts - 1] if texts <= 256 else round((texts - 1) * JOINER_TOKENS)
    )
    return counted if counted > 1 else 1, fixed, opened > 0


def _measure(
    renderer: Any, api: Api, messages: Any, model: str | None, encoding: Any, preamble: Any
) -> tuple[int, int, int | None, bool, Any]:
    """(tokens counted from texts, tokens known without a tokenizer, the last message's
    digest, whether a user turn opens, the rendering) of ``messages`` after ``preamble``
    (None: none). Plain chat messages after a preamble of no text are counted from what is
    kept of them (no rendering: complete, nothing carried), the rest rendered and counted."""
    if (
        api == "openai_chat"
        and messages
        and (preamble is None or (not preamble.texts and preamble.complete))
    ):
        features = exact = 0
        first = kept = None
        for message in messages:
            if type(message) is not dict or len(message) != 2:
                break
            role, content = message.get("role"), message.get("content")
            if type(role) is not str or type(content) is not str:
                break
            found = _rendered.get((role, content)) or _keep(renderer, api, message, model)
            if found is None or not found.summable:
                break
            features += found.packed
            if kept is None:
                first = found
            elif encoding is not None:  # the one before, with the newline joining them
                exact += kept.exact.get(encoding) or kept.count(encoding, True)
            kept = found
        else:
            counted, fixed, opened = (
                kept.alone.get(encoding) or kept.count_alone(encoding)
                if first is kept
                else _summed(features - first.head - kept.tail, exact, kept, encoding)
            )  # type: ignore[union-attr]
            fixed += 0 if preamble is None else preamble.fixed
            return counted, fixed, kept.digest, opened, None  # type: ignore[union-attr]
    total = renderer.Rendering()
    if preamble is not None:
        total.add(preamble)
    total, last, opened = _render_messages(renderer, api, messages, model, total)
    counted, fixed = _count(total, encoding)
    return counted, fixed, _digest(last) if last is not None else None, opened, total


_renderer: Any = None  # the requests module, loaded on the first estimate (start-up cost)


def _load_renderer() -> Any:
    global _renderer
    from . import requests

    _renderer = requests
    return requests


class _Ratios:
    """A model's last ``window`` actual/estimate ratios and their mean (kept current on
    every observation, so estimating reads one number)."""

    __slots__ = ("values", "mean")

    def __init__(self, window: int) -> None:
        self.values: deque[float] = deque(maxlen=window)
        self.mean: float | None = None

    def add(self, ratio: float) -> None:
        self.values.append(ratio)
        self.mean = sum(self.values) / len(self.values)


def _range_kind(estimate: RequestEstimate) -> str:
    """What an incomplete estimate's bound is learnt under, with its model: the kind of its
    parts of unknown size ("image", "file", "server:web_search"...), else "incomplete"."""
    return estimate.guessed[0] if estimate.guessed is not None else "incomplete"


def _default_bound(estimate: RequestEstimate) -> int:
    """An incomplete estimate's bound before anything is learnt for its model and kind:
    :data:`_DEFAULT_BOUNDS` of its kind's class ("mixed": the server tools' figure)."""
    kind = _range_kind(estimate)
    if kind.startswith("server:"):
        names = kind.removeprefix("server:").split("+")
        kind = "tool_search" if all(n.startswith(_SEARCH_TOOLS) for n in names) else "server"
    times, per_part = _DEFAULT_BOUNDS.get(kind, _DEFAULT_BOUNDS["server"])
    parts = estimate.guessed[1] if estimate.guessed is not None else 0
    return round(estimate.estimate.input_tokens * times) + max(parts, 1) * per_part


def _put(table: dict[Any, Any], key: Any, value: Any) -> None:
    """Set ``table[key]`` as its newest entry, dropping the oldest past ``_MAX_KEYS``: state
    per model and per agent stays bounded however many names a gateway forwards."""
    table.pop(key, None)
    if len(table) >= _MAX_KEYS:
        del table[next(iter(table))]
    table[key] = value


class Estimator:
    """Estimates requests, keeps per-model calibration and per-agent conversation cursors."""

    def __init__(self, window: int = _CALIBRATION_WINDOW, use_tokenizer: bool = True) -> None:
        self._window = window
        self._use_tokenizer = use_tokenizer
        self._ratios: dict[str | None, _Ratios] = {}
        self._cursors: dict[tuple[Any, ...], _Cursor] = {}
        self._responses: dict[str, int] = {}  # response id -> its input + output (chains)
        self._media: dict[tuple[str | None, str | None], _Ratios] = {}  # tokens per unknown part
        #: actual/estimate of incomplete estimates, per model and kind (their upper bounds)
        self._ranges: dict[tuple[str | None, str], _Ratios] = {}
        #: bare requests' preambles, digests, encodings (see _context)
        self._preambles: dict[tuple[Any, ...], tuple[Any, int, Any, int]] = {}
        self._lock = threading.Lock()  # writers; readers take single dict look-ups

    def calibration(self, model: str | None) -> float | None:
        """The current actual/estimate ratio for ``model``'s heuristic estimates, if learnt."""
        ratios = self._ratios.get(model)
        return ratios.mean if ratios is not None else None

    def estimate(
        self, request: Request, *, provider: str, agent: str = "default"
    ) -> RequestEstimate:
        """The best available estimate of ``request``'s input tokens; an incomplete one with
        its upper bound (``input_max``): learnt for its model and kind, else the default."""
        found = self._estimate(request, provider, agent)
        if found.complete:
            return found
        ranges = self._ranges.get((found.model, _range_kind(found)))
        if ranges is None or not ranges.values:
            return found._replace(input_max=_default_bound(found))
        tokens = found.estimate.input_tokens
        learnt = max(tokens, round(tokens * max(ranges.values)))
        if len(ranges.values) < min(_MIN_LEARNT, self._window):  # too few: only raise the default
            learnt = max(learnt, _default_bound(found))
        return found._replace(input_max=learnt)

    def _estimate(self, request: Request, provider: str, agent: str) -> RequestEstimate:
        """The best available estimate of ``request``'s input tokens."""
        renderer = _renderer or _load_renderer()
        api = request.api
        model = request.model
        messages = request.messages  # a list or tuple (the common case), else made one
        messages = messages if type(messages) in _SEQUENCES else renderer.messages_of(request)
        messages = renderer.after_compaction(api, messages)  # those the model is shown
        found = (
            None
            if request.system or request.tools or request.response_format is not None
            else self._preambles.get((api, model, request.thinking, request.reasoning_mode))
        )
        if found is None or found[3] != len(LOADED):  # once per bare request's kind
            found = self._context(renderer, request)
        preamble, preamble_digest, encoding, _ = found
        key = (agent, provider, model)
        n = len(messages)
        ratios = self._ratios.get(model) if encoding is None else None  # the calibration
        ratio = ratios.mean if ratios is not None else None
        cursor = self._cursors.get(key)
        if (  # (not after server-run tools: the reported input holds what they returned)
            cursor is not None
            and not preamble.server
            and 0 < cursor.n_messages < n
            and cursor.preamble_digest == preamble_digest
            and _last_digest(renderer, api, messages[cursor.n_messages - 1], model)
            == cursor.last_digest
        ):  # delta: the reported input plus only what was appended since
            return self._delta(
                renderer,
                api,
                messages,
                model,
                encoding,
                ratio,
                key,
                cursor,
                preamble,
                preamble_digest,
            )
        return self._whole(
            request, renderer, api, messages, model, encoding, ratio, key, preamble, preamble_digest
        )

    def _delta(
        self,
        renderer: Any,
        api: Api,
        messages: Sequence[Any],
        model: str | None,
        encoding: Any,
        ratio: float | None,
        key: tuple[Any, ...],
        cursor: _Cursor,
        preamble: Any,
        preamble_digest: int,
    ) -> RequestEstimate:
        """A continued conversation's estimate: the input the backend reported for the turn
        before, plus only what was appended since (counted, and scaled by the calibration)."""
        n = len(messages)
        counted, fixed, last_digest, opened, appended = _measure(
            renderer, api, messages[cursor.n_messages :], model, encoding, None
        )
        scaled = round(counted * ratio) if ratio else counted
        # a new user turn drops the reasoning the reported input carried
        kept = 0 if opened else cursor.carried
        tokens = cursor.reported_input - cursor.carried + kept + scaled + fixed
        guessed, tokens = (
            self._guessed(appended, model, tokens)
            if (appended is not None and appended.unknown)
            else (None, tokens)
        )
        return RequestEstimate(
            estimate=Estimate(max(1, tokens), "delta"),
            calibration=ratio,
            model=model,
            cursor_key=key,
            n_messages=n,
            last_digest=last_digest,
            preamble_digest=preamble_digest,
            heuristic_raw=0,
            fixed=fixed,
            complete=(appended is None or appended.complete) and not preamble.server,
            carried=kept + (appended.carried if appended is not None else 0),
            guessed=guessed,
            server_tools=preamble.server,
            input_max=None,
        )

    def _whole(
        self,
        request: Request,
        renderer: Any,
        api: Api,
        messages: Sequence[Any],
        model: str | None,
        encoding: Any,
        ratio: float | None,
        key: tuple[Any, ...],
        preamble: Any,
        preamble_digest: int,
    ) -> RequestEstimate:
        """The whole request's estimate: exact with the model's tokenizer, else full (counted
        and scaled by the calibration); a known Responses chain adds what the server holds."""
        n = len(messages)
        # continuing a known Responses chain, the server holds the earlier input
        # (instructions and tools included) and output
        chained, known_chain = (0, True) if request.chained is None else self._chained(request)
        counted, fixed, last_digest, _, rendering = _measure(
            renderer, api, messages, model, encoding, None if chained else preamble
        )
        if encoding is not None:  # exact: the tokenizer over the whole request
            tokens, source, raw = counted + fixed + chained, "exact", 0
        else:
            tokens = (round(counted * ratio) if ratio else counted) + fixed + chained
            source, raw = "full", counted
        guessed, tokens = (
            self._guessed(rendering, model, tokens)
            if (rendering is not None and rendering.unknown)
            else (None, tokens)
        )
        return RequestEstimate(
            estimate=Estimate(tokens, source),
            calibration=ratio,
            model=model,
            cursor_key=key,
            n_messages=n,
            last_digest=last_digest,
            preamble_digest=preamble_digest,
            heuristic_raw=raw,
            fixed=fixed + chained,
            complete=known_chain and (rendering is None or rendering.complete),
            carried=rendering.carried if rendering is not None else 0,
            guessed=guessed,
            server_tools=preamble.server,
            input_max=None,
        )

    def _context(self, renderer: Any, request: Request) -> tuple[Any, int, Any, int]:
        """(the request's preamble, its digest, the encoding counting it (None: the
        heuristic), how many encodings were loaded). A request with no system prompt, tools
        or output schema (most) has those of its API and model: made once, then read from a
        table (only read from there on) while no other encoding loads."""
        loaded = len(LOADED)  # before looking: a load meanwhile makes what is kept stale
        encoding = (
            encoding_for(request.model)
            if (self._use_tokenizer and request.api.startswith("openai"))
            else None
        )
        preamble = renderer.render_preamble(request)
        found = (preamble, _digest(preamble), encoding, loaded)
        if not (request.system or request.tools or request.response_format is not None):
            with self._lock:
                _put(
                    self._preambles,
                    (request.api, request.model, request.thinking, request.reasoning_mode),
                    found,
                )
        return found

    def _guessed(self, rendering: Any, model: str | None, tokens: int) -> tuple[Any, int]:
        """Parts of unknown size: the tokens per part learnt for ``model`` in place of the
        renderer's per-item figure, when learnt. (what was counted for them, the total)

        What server-run tools return is counted at most as much as the rest of the request:
        a call that does not run them (or whose results are already in its messages) is
        billed about the rest, so the estimate stays within 2x of it; the bound
        (``input_max``) carries what they may add."""
        if not rendering.unknown:
            return None, tokens
        kind = rendering.unknown_kind
        learnt = self._media.get((model, kind))
        if learnt is None or learnt.mean is None:
            return (kind, rendering.unknown, rendering.unknown_tokens), tokens
        applied = round(learnt.mean * rendering.unknown)
        known = tokens - rendering.unknown_tokens
        if kind.startswith("server:"):  # at most what the request itself says
            applied = min(applied, known)
        return (kind, rendering.unknown, applied), known + applied

    def _chained(self, request: Request) -> tuple[int, bool]:
        """(tokens of the server-side turns a Responses request continues, whether known)."""
        previous = request.chained
        if previous is None:
            return 0, True
        known = self._responses.get(previous)
        return (known, True) if known is not None else (0, False)

    def remember(self, response_id: str, context_tokens: int) -> None:
        """A Responses response's input + output: the context a later request chained to it
        with ``previous_response_id`` carries on the server (bounded, newest kept)."""
        with self._lock:
            _put(self._responses, response_id, context_tokens)

    def observe(self, estimate: RequestEstimate, reported_input: int | None) -> None:
        """Learn from a completed call: the calibration (from complete ``full`` estimates),
        the tokens per part of unknown size, and the agent's cursor for later ``delta``
        estimates. ``reported_input`` must be reported."""
        if reported_input is None or reported_input <= 0:
            return
        made = estimate.estimate
        cursor = _Cursor(
            estimate.n_messages,
            estimate.last_digest,
            estimate.preamble_digest,
            reported_input,
            estimate.carried,
        )
        with self._lock:
            _put(self._cursors, estimate.cursor_key, cursor)
            if not estimate.complete:
                self._learn_guessed(estimate, reported_input)
                ratio = reported_input / max(made.input_tokens, 1)
                kind = (estimate.model, _range_kind(estimate))
                self._add(self._ranges, kind, min(ratio, _MAX_RANGE))
            elif estimate.heuristic_raw > 0 and made.source == "full":
                ratio = (reported_input - estimate.fixed) / estimate.heuristic_raw
                low, high = _RATIO_BOUNDS
                self._add(self._ratios, estimate.model, min(max(ratio, low), high))

    def _learn_guessed(self, estimate: RequestEstimate, reported_input: int) -> None:
        """The actual tokens per part of unknown size: what the call reported beyond the rest
        of the estimate, shared by its parts of one kind (a mix of kinds teaches nothing)."""
        if estimate.guessed is None:
            return
        kind, count, counted = estimate.guessed
        if kind == "mixed" or (estimate.server_tools and not kind.startswith("server:")):
            return  # what server-run tools returned is in the residual too
        rest = estimate.estimate.input_tokens - counted
        per_part = (reported_input - rest) / count
        self._add(self._media, (estimate.model, kind), min(max(per_part, 0.0), _MAX_PER_PART))

    def _add(self, table: dict[Any, _Ratios], key: Any, value: float) -> None:
        ratios = table.get(key)
        if ratios is None:
            ratios = _Ratios(self._window)
            _put(table, key, ratios)
        ratios.add(value)

    def output_tokens(self, text: str, model: str | None) -> int:
        """Estimated output tokens of streamed text (a stream that ended without usage)."""
        return count_text(text, model)
