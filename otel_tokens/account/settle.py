"""The account step: a call record and its tracking in, an :class:`~.outcome.Outcome` out.

Before the call :meth:`Accountant.open` estimates the request and checks the budgets of the
agent the handler resolved (its part written on the call's tracking); while it streams, running usage goes to the ledger as in-flight; at the
end :meth:`Accountant.settle` validates the usage, prices it, completes the agent's
TokenState, writes the ledger rows, checks for anomalies and measures the estimate. No
OpenTelemetry here: the recorder emits what the outcome says. Faults are reported to the
fault sink and never raised; the one deliberate exception is :class:`BudgetExceeded`, from
:meth:`open`, when the user opted in to budget enforcement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .. import faults
from ..errors import LedgerPersistenceError
from ..usage import Billing, Usage
from .anomalies import AnomalyGuard, BudgetExceeded
from .outcome import Line, Outcome, error_type
from .pricing import PriceResult, Pricer
from .conversation_totals import ConversationTotals
from .fleet_budget import FleetBudgets, reserve, settle_reservation

if TYPE_CHECKING:
    from ..call import Call
    from ..tracking import Tracking
    from .agents import AgentEntry
    from .anomalies import Anomaly
    from .estimate import Estimator
    from .state import Estimate, StateFigures

__all__ = ["Accountant"]

_NO_PRICE = PriceResult(None, None)
_ONCE_KEYS_MAX = 8192  # response ids remembered as counted (responses read again are read soon)
#: span attribute of a call whose response had been counted already (read again, not re-billed)
COUNTED_BEFORE = "otel_tokens.usage.counted_before"


class Accountant:
    """Turns call records into outcomes, keeping each agent's state, ledger and budget.

    ``max_tokens``: the plausibility bound; a call reporting more tokens of one class is not
    real usage (a broken or hostile backend): its usage is rejected like a negative count,
    counted as ``usage_invalid`` and never billed, so that no counter, TokenState or ledger
    total is poisoned for the life of the process. ``max_cost``: the same for a cost the
    backend reported (a gateway's bill): above it the cost is dropped (the tokens are kept
    and priced), counted as ``usage_invalid``. ``fleet``: the budgets the fleet shares in
    PostgreSQL (None without a ledger URL), built by the handler from the settings: each call
    reserves its projected spend at :meth:`open` and settles it at :meth:`settle`."""

    __slots__ = (
        "pricer",
        "guard",
        "estimator",
        "max_tokens",
        "max_cost",
        "conversations",
        "_counted",
        "fleet",
    )

    def __init__(
        self,
        pricer: Pricer,
        guard: AnomalyGuard,
        estimator: Estimator,
        max_tokens: int = 100_000_000,
        conversations: ConversationTotals | None = None,
        max_cost: float = 10_000.0,
        fleet: FleetBudgets | None = None,
    ) -> None:
        self.pricer = pricer
        self.guard = guard
        self.estimator = estimator
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        self.conversations = conversations if conversations is not None else ConversationTotals()
        self._counted: dict[tuple[str, str], None] = {}  # once-keys whose usage was counted
        self.fleet = fleet

    # -- before and during the call -------------------------------------------------------------
    def open(self, call: Call, tracking: Tracking, refuse: bool = True) -> None:
        """The pre-call estimate, the budget check and the agent's streaming state, on the
        call's ``tracking``.

        Raises only :class:`BudgetExceeded` (enforcement opted in), never when not ``refuse``
        (a call spent already: its usage still counts against the budgets at its end)."""
        entry = tracking.agent  # who the call is for: resolved by the handler
        if tracking.estimate is None and call.request is not None:
            try:
                estimated = self.estimator.estimate(
                    call.request,
                    provider=call.provider,
                    agent=entry.name if entry is not None else "default",
                )
                tracking.request_estimate, tracking.estimate = estimated, estimated.estimate
            except Exception as exc:
                faults.report("estimate", exc)
        if entry is None:
            return
        try:
            estimate = tracking.estimate
            if refuse and self.guard.enforcing:  # else there is nothing to check
                self.guard.check_before(entry.name, estimate.input_tokens if estimate else None)
            if self.fleet is not None:  # the call's room in the fleet's budgets
                tracking.reservation = reserve(self.fleet, self.pricer, call, tracking, entry.name)
        except BudgetExceeded:
            if refuse:
                raise
        except Exception as exc:
            faults.report("internal", exc)
        if call.stream:
            try:
                tracking.stream_handle = entry.state.start_streaming(tracking.estimate)
            except Exception as exc:
                faults.report("state", exc)

    def in_flight(self, tracking: Tracking, usage: Usage) -> None:
        """A running usage total seen mid-stream: the ledger's in-flight value for the call."""
        bound = self.max_tokens
        if (usage.input_tokens or 0) > bound or (usage.output_tokens or 0) > bound:
            return  # not real usage: the end rejects it (and counts it) once
        try:
            if tracking.agent is not None:
                if tracking.stream_key is None:
                    tracking.stream_key = object()
                tracking.agent.ledger.stream_update(tracking.stream_key, usage)
        except Exception as exc:
            faults.report("ledger", exc)

    def update_estimate(self, tracking: Tracking, estimate: Estimate) -> None:
        """A better input estimate while the call runs (shown by the agent's display)."""
        try:
            tracking.estimate = estimate
            if tracking.stream_handle is not None and tracking.agent is not None:
                tracking.agent.state.set_estimate(tracking.stream_handle, estimate)
        except Exception as exc:
            faults.report("state", exc)

    # -- the end ------------------------------------------------------------------------------
    def settle(self, call: Call, tracking: Tracking) -> Outcome:
        """The finished call's outcome (its record and its tracking read); the agent's state,
        ledger and budget brought up to date."""
        failed = call.error is not None
        reported = call.usage  # tokens reported: not missing (the common case)
        tokens = type(reported) is Usage and (
            reported.input_tokens is not None or reported.output_tokens is not None
        )
        billing = call.billing
        if billing is not None and billing.counted:  # units counted from the request
            billing = self._billing(call, billing, failed)
        missing = not failed and not call.pending and not tokens and _no_usage(call, billing)
        usage, parts, again = self._usage(call, tracking.estimate, failed, billing)
        # the same response read again: billed once, counted once (the record is left as is)
        attributes = call.end_attributes
        if again:
            billing, attributes = None, {**(attributes or {}), COUNTED_BEFORE: True}
        response_model = call.response_model or usage.model
        default_model = response_model or call.request_model
        prices, price = self._prices(call, usage, parts, default_model, billing)
        reservation = tracking.reservation
        if reservation is not None:  # the fleet's budgets: the call's actual spend
            settle_reservation(self.fleet, reservation, usage, price, failed)
        state, anomalies = self._update_agent(
            call,
            tracking,
            usage,
            parts,
            prices,
            price,
            default_model,
            response_model,
            failed,
            again,
        )
        ended = call.ended_at if call.ended_at is not None else call.started
        error = call.error
        return Outcome(
            failed=failed,
            error_type=error_type(error) if failed else None,
            error_message=_message(error) if failed else None,
            usage=usage,
            price=price,
            lines=_lines(usage, parts, prices, price, response_model, default_model),
            response_model=response_model,
            response_id=call.response_id or usage.response_id,
            finish_reasons=tuple(map(str, call.finish_reasons)) if call.finish_reasons else (),
            estimate=tracking.estimate,
            estimate_error=self._estimate_error(call, tracking, usage, failed),
            duration=ended - call.started,
            time_to_first_chunk=None
            if call.first_chunk_at is None
            else call.first_chunk_at - call.started,
            stream=call.stream,
            state=state,
            anomalies=anomalies,
            attributes=attributes,
            usage_missing=missing,
        )

    def _update_agent(
        self,
        call: Call,
        tracking: Tracking,
        usage: Usage,
        parts: tuple[Usage, ...],
        prices: list[PriceResult],
        price: PriceResult,
        default_model: str | None,
        response_model: str | None,
        failed: bool,
        again: bool,
    ) -> tuple[StateFigures | None, tuple[Anomaly, ...]]:
        """The agent's part of settling a call: its state (a turn, unless the call failed or was
        idle), its ledger row and its anomalies; returns its figures after the call and those."""
        entry = tracking.agent
        if entry is None:
            return None, ()
        # a poll of work still under way, or a response counted before: no turn, no row
        idle = (call.pending or again) and not _has_tokens(usage)
        state = None
        try:
            if failed or idle:
                entry.state.fail(tracking.stream_handle)
            else:  # the agent's figures after the call, read with it
                state = entry.state.complete(usage, tracking.stream_handle)
        except Exception as exc:
            faults.report("state", exc)
        if not idle:
            self._write_ledger(
                entry, call, tracking, usage, parts, prices, price, default_model, failed
            )
        anomalies = self._anomalies(entry.name, tracking, usage, price, response_model)
        if state is None:  # no turn (or a state fault): the figures as they are
            try:
                state = entry.state.figures()
            except Exception as exc:
                faults.report("state", exc)
        return state, anomalies

    def _anomalies(
        self,
        agent: str,
        tracking: Tracking,
        usage: Usage,
        price: PriceResult,
        response_model: str | None,
    ) -> tuple[Anomaly, ...]:
        """What the call's spend sets off: the guard's anomalies (budgets, spike rule) and the
        alert-only fleet budgets its reservation crossed."""
        anomalies: tuple[Anomaly, ...] = ()
        inp, out, cost = usage.input_tokens, usage.output_tokens, price.cost_usd
        if inp is not None or out is not None or cost is not None:  # else nothing to check
            total = out if inp is None else inp if out is None else inp + out  # total_tokens
            try:
                found = self.guard.check_after(
                    agent, total, cost, response_model, tracking.tenant, tracking.user
                )
                anomalies = tuple(found) if found else ()  # none: the common case
            except Exception as exc:
                faults.report("internal", exc)
        reservation = tracking.reservation
        if reservation is not None and reservation.alerts:
            anomalies += tuple(reservation.alerts)  # alert-only fleet budgets crossed
        return anomalies

    def _billing(self, call: Call, billing: Billing, failed: bool) -> Billing | None:
        """The call's ``billing``, the units counted from its request (:class:`Billing`'s
        ``counted``) kept as billed units where the model's price is by them alone, else
        dropped: a speech request's characters are tts-1's bill, not gpt-4o-mini-tts's."""
        model, kept = call.response_model or call.request_model, ()
        alone = self.pricer.priced_by_alone
        try:
            if not failed:
                kept = tuple(
                    (unit, count)
                    for unit, count in billing.counted
                    if alone(call.provider, model, unit, billing.context)
                )
        except Exception as exc:  # the call still ends, its counted units unbilled
            faults.report("pricing", exc)
        units = tuple(sorted(billing.units + kept))
        return Billing(billing.context, units) if billing.context or units else None

    def _usage(
        self, call: Call, estimate: Estimate | None, failed: bool, billing: Billing | None
    ) -> tuple[Usage, tuple[Usage, ...], bool]:
        """(the call's total usage, its per-model parts, whether the response was counted
        before); what no backend reported is absent."""
        usage, parts = call.usage, call.parts
        if usage is not None and type(usage) is Usage:
            usage = self._without_cost(call, usage)
        if parts:
            parts = tuple(self._without_cost(call, p) if type(p) is Usage else p for p in parts)
        valid: tuple[Usage, ...] = ()
        if parts:
            valid = tuple(part for part in parts if type(part) is Usage)
            if len(valid) != len(parts):
                faults.report("usage_invalid", detail="a usage part is not a Usage")
            if usage is None and valid:
                usage = sum(valid, Usage())
        if usage is not None and type(usage) is not Usage:
            faults.report("usage_invalid", detail=f"not a Usage: {type(usage).__name__}")
            usage = Usage()
        if call.output_text is not None and (usage is None or usage.output_tokens is None):
            usage = self._estimated(call, estimate, usage)
        if usage is None or (usage.input_tokens is None and usage.output_tokens is None):
            # no token figure (a premium-request count alone is not usage); an empty record is
            # the capture's "unusable", already counted as usage_invalid
            # a response without usage is a fault of the backend's data; a stream without
            # usage is normal (the SDK default) and only counted on otel_tokens.usage.missing
            if (
                not failed
                and not call.pending
                and not call.stream
                and _no_usage(call, billing)
                and (usage is None or not usage.is_empty)
            ):
                faults.report("usage_missing", detail=f"{call.provider} returned no token usage")
            usage = usage if usage is not None else Usage()
        elif (
            valid
            or (usage.input_tokens or 0) > self.max_tokens
            or (usage.output_tokens or 0) > self.max_tokens
        ) and not self._plausible(call, usage, valid):
            usage, valid = Usage(), ()
        elif call.cumulative_key is not None and not valid:
            try:  # a conversation's running total: this call's own share
                usage = self.conversations.own(call.cumulative_key, usage)
            except Exception as exc:
                faults.report("ledger", exc)
        elif call.once_key is not None and self._counted_before(call.once_key):
            empty = Usage()
            return empty, (empty,), True  # the same response read again
        return usage, valid or (usage,), False

    def _counted_before(self, key: tuple[str, str]) -> bool:
        """True when this response's usage was counted already; else remember it (bounded)."""
        counted = self._counted
        if key in counted:
            return True
        if len(counted) >= _ONCE_KEYS_MAX:
            del counted[next(iter(counted))]  # the oldest: responses are polled soon after
        counted[key] = None
        return False

    def counted(self, key: tuple[str, str], entry: AgentEntry | None) -> bool:
        """True when the response ``key`` names was counted already: by this process (its
        once-keys), else in the ledger file of ``entry`` (another process's rows). Read, not
        remembered: the call's end remembers it."""
        if key in self._counted:
            return True
        return entry is not None and entry.ledger.recorded(key[1])

    def _plausible(self, call: Call, usage: Usage, parts: tuple[Usage, ...]) -> bool:
        """False (and counted) when a token class is beyond any real request. Input includes
        the cache classes and output the reasoning, so two checks per record suffice."""
        bound = self.max_tokens
        if (usage.input_tokens or 0) <= bound and (usage.output_tokens or 0) <= bound and not parts:
            return True
        for record in (usage, *parts):
            for value in (record.input_tokens, record.output_tokens):
                if value is not None and value > bound:
                    faults.report(
                        "usage_invalid",
                        detail=f"{call.provider} reported {value} tokens "
                        f"in one request, above the bound {bound} "
                        "(OTEL_TOKENS_MAX_TOKENS_PER_REQUEST): rejected",
                    )
                    return False
        return True

    def _without_cost(self, call: Call, usage: Usage) -> Usage:
        """``usage`` without a reported cost beyond any real request (counted): its tokens
        stay, and are priced as if no cost had been reported."""
        if usage.cost_usd is None or usage.cost_usd <= self.max_cost:
            return usage
        faults.report(
            "usage_invalid",
            detail=f"{call.provider} reported a cost of "
            f"{usage.cost_usd:.6g} USD for one request, above the bound "
            f"{self.max_cost:g} (OTEL_TOKENS_MAX_COST_PER_REQUEST): cost rejected, "
            "tokens kept",
        )
        return usage.replace(cost_usd=None)

    def _estimated(
        self, call: Call, estimate: Estimate | None, usage: Usage | None
    ) -> Usage | None:
        """A response that reported no output (a stream without usage): output estimated
        from the streamed text and, when no input was reported either, input from the
        pre-call ``estimate``; marked ``estimated``."""
        text = call.output_text or ""
        model = call.request_model or call.response_model
        try:
            estimated = self.estimator.output_tokens(text, model) if text else 0
        except Exception as exc:  # the call still ends, with what was reported
            faults.report("estimate", exc)
            return usage
        if usage is None or usage.input_tokens is None:
            return Usage(
                input_tokens=estimate.input_tokens if estimate is not None else None,
                output_tokens=estimated,
                model=call.response_model,
                provider=call.provider,
                source="estimated",  # a bill reported
                cost_usd=usage.cost_usd if usage is not None else None,
            )  # stands
        # output includes reasoning: an estimate below the reported reasoning is known to be low
        return usage.replace(
            output_tokens=max(estimated, usage.reasoning_tokens or 0), source="estimated"
        )

    def _prices(
        self,
        call: Call,
        usage: Usage,
        parts: tuple[Usage, ...],
        default_model: str | None,
        billing: Billing | None,
    ) -> tuple[list[PriceResult], PriceResult]:
        """One price per part, and the call's: the backend's own total when it gave one.

        The response's billing goes with its first part (the model that answered: hosted-tool
        fees, billed units); its price context (service tier) applies to every part."""
        provider = call.provider
        prices: list[PriceResult] = []
        for part in parts:
            if (
                part.input_tokens is None
                and part.output_tokens is None
                and part.cost_usd is None
                and not (billing and billing.units)
            ):
                prices.append(_NO_PRICE)  # nothing to price
            else:
                try:
                    prices.append(
                        self.pricer.price(part, provider, part.model or default_model, billing)
                    )
                except Exception as exc:
                    faults.report("pricing", exc)
                    prices.append(_NO_PRICE)
            if billing is not None and billing.units:
                billing = Billing(billing.context) if billing.context else None
        if usage.source == "estimated":
            prices = [_estimated(x) for x in prices]
        if len(parts) == 1:
            return prices, prices[0]
        if usage.cost_usd is not None and not _own_costs(parts):
            return _share(usage.cost_usd, parts, prices), PriceResult(usage.cost_usd, "provider")
        known = [x for x in prices if x.cost_usd is not None]
        if not known:
            return prices, _NO_PRICE
        source = "provider" if all(x.source == "provider" for x in known) else known[0].source
        return prices, PriceResult(
            sum(x.cost_usd for x in known),  # type: ignore[misc]
            source,
            components=tuple(dict.fromkeys(c for x in prices for c in x.components)),
            unpriced_components=tuple(
                dict.fromkeys(c for x in prices for c in x.unpriced_components)
            ),
        )

    @staticmethod
    def _write_ledger(
        entry: AgentEntry,
        call: Call,
        tracking: Tracking,
        usage: Usage,
        parts: tuple[Usage, ...],
        prices: list[PriceResult],
        price: PriceResult,
        default_model: str | None,
        failed: bool,
    ) -> None:
        """The call's ledger rows: one, or one per model of a several-model call."""
        ledger, key = entry.ledger, tracking.stream_key
        usage, ids = _ledger_row(call, tracking, usage, failed)
        response_id = call.response_id
        try:
            if failed and usage.input_tokens is None and usage.output_tokens is None:
                # a failed call with no usage is still a row (its error type; tokens unknown),
                # under the model it asked for
                if key is not None:
                    ledger.stream_discard(key)
                if usage.model is None and default_model is not None:
                    usage = usage.replace(model=default_model)
                ledger.append(usage, request_id=response_id, **ids)
            elif len(parts) == 1:
                if key is not None:
                    ledger.stream_finalize(
                        key, usage, cost_usd=price.cost_usd, request_id=response_id, **ids
                    )
                else:
                    ledger.append(usage, cost_usd=price.cost_usd, request_id=response_id, **ids)
            else:
                if key is not None:
                    ledger.stream_discard(key)
                for part, part_price in zip(parts, prices):
                    ledger.append(
                        part if part.model else part.replace(model=default_model),
                        cost_usd=part_price.cost_usd,
                        request_id=f"{response_id}/{part.model}" if response_id else None,
                        **ids,
                    )
        except LedgerPersistenceError as exc:
            faults.report("ledger_persistence", exc)
        except Exception as exc:
            faults.report("ledger", exc)

    def _estimate_error(
        self, call: Call, tracking: Tracking, usage: Usage, failed: bool
    ) -> float | None:
        """(estimate - actual) / actual of reported input; the estimator learns from it."""
        estimate, actual = tracking.estimate, usage.input_tokens
        if estimate is None or not actual or usage.source == "estimated":
            return None
        request_estimate = tracking.request_estimate
        if request_estimate is not None and not failed:
            try:  # calibration and the agent's cursor for later delta estimates: the
                # message's own input (the first part), not iterations billed apart (a
                # compaction reads the whole pre-compaction context; the next request does not)
                parts = call.parts
                own = parts[0].input_tokens if parts and type(parts[0]) is Usage else None
                self.estimator.observe(request_estimate, own or actual)
                request, response_id = call.request, call.response_id or usage.response_id
                if response_id and request is not None and request.api == "openai_responses":
                    self.estimator.remember(response_id, actual + (usage.output_tokens or 0))
            except Exception as exc:
                faults.report("estimate", exc)
        return (estimate.input_tokens - actual) / actual


def _lines(
    usage: Usage,
    parts: tuple[Usage, ...],
    prices: list[PriceResult],
    price: PriceResult,
    response_model: str | None,
    default_model: str | None,
) -> tuple[Line, ...]:
    """The call's metric points: one line, or one per model plus the backend's totals."""
    if len(parts) == 1:
        return (
            Line(
                model=response_model,
                usage=usage,
                cost_usd=price.cost_usd,
                cost_source=price.source,
                unpriced=price.unpriced and _has_tokens(usage),
                premium_requests=usage.premium_requests,
                unpriced_components=price.unpriced_components,
                price_match=price.match,
            ),
        )
    # the backend's total goes on the call's own line only when the parts have no cost of their own
    total_cost = usage.cost_usd is not None and not _own_costs(parts)
    part_premium = any(part.premium_requests is not None for part in parts)
    lines = []
    for part, part_price in zip(parts, prices):
        lines.append(
            Line(
                part.model or default_model or response_model,
                part,
                None if total_cost else part_price.cost_usd,
                None if total_cost else part_price.source,
                not total_cost and part_price.unpriced and _has_tokens(part),
                part.premium_requests,
                part_price.unpriced_components,
                part_price.match,
            )
        )
    premium = None if part_premium else usage.premium_requests
    if total_cost or premium is not None:
        lines.append(
            Line(
                response_model,
                None,
                usage.cost_usd,
                "provider" if total_cost else None,
                False,
                premium,
            )
        )
    return tuple(lines)


def _no_usage(call: Call, billing: Billing | None) -> bool:
    """The backend reported no token usage for the call (before any estimate), nor any
    other billed unit (``billing``: the call's, as :meth:`Accountant._billing` resolves it)."""
    usage = call.usage
    if _has_tokens(usage) or (billing is not None and billing.units):
        return False  # tokens, or other billed units (seconds of audio)
    if type(usage) is Usage and usage.is_empty:
        return False  # reported but unusable: counted as usage_invalid, not as missing
    return not any(_has_tokens(part) for part in call.parts or ())


def _estimated(price: PriceResult) -> PriceResult:
    """A computed price of estimated usage says so (``otel_tokens.cost.source``)."""
    if price.source != "computed":
        return price
    return PriceResult(
        price.cost_usd, "estimated", price.unpriced, price.components, price.unpriced_components
    )


def _own_costs(parts: tuple[Usage, ...]) -> bool:
    """True when every part carries the backend's own cost (Claude Code's per-model costUSD)."""
    return all(part.cost_usd is not None for part in parts)


def _ledger_row(
    call: Call, tracking: Tracking, usage: Usage, failed: bool
) -> tuple[Usage, dict[str, Any]]:
    """What a call's ledger row says beside its figures, built apart from its writing: who it
    was for, its provider (when the usage names none), its error type, its trace and span ids;
    and the usage as the row shows it (not "reported" when no figure was)."""
    user, tenant, conversation = tracking.user, tracking.tenant, tracking.conversation_id
    who = (user, tenant, conversation) if user or tenant or conversation else None
    provider = None
    if _has_tokens(usage):
        if usage.provider is None:  # a backend whose usage does not say: the call's
            provider = call.provider
    elif usage.source == "reported":  # no figure was reported: the row must not say so
        usage = usage.replace(source="estimated")
    ids = {
        "trace_id": tracking.trace_id,
        "span_id": tracking.span_id,
        "who": who,
        "provider": provider,
        "error_type": error_type(call.error) if failed else None,
    }
    return usage, ids


def _has_tokens(usage: Usage | None) -> bool:
    if type(usage) is not Usage:  # None, or not a usage record (counted as invalid)
        return False
    return usage.input_tokens is not None or usage.output_tokens is not None


def _message(error: BaseException | str | None) -> str | None:
    if error is None:
        return None
    message = str(error) if isinstance(error, BaseException) else error
    return message[:1000] or error_type(error)


def _share(total: float, parts: Sequence[Usage], prices: list[PriceResult]) -> list[PriceResult]:
    """Split a run's provider-reported total over its parts, in proportion to the parts' own
    costs (or tokens when they have none), so the ledger's records add up to the total."""
    weights = [x.cost_usd for x in prices]
    if any(w is None for w in weights) or not sum(weights):  # type: ignore[arg-type]
        weights = [float(part.total_tokens or 0) for part in parts]
    whole = sum(weights)  # type: ignore[arg-type]
    if not whole:
        weights, whole = [1.0] * len(parts), float(len(parts))
    return [PriceResult(total * w / whole, "provider") for w in weights]  # type: ignore[operator]
