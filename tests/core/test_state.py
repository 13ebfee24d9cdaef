"""TokenState: RFC 00040 invariants, Display Invariant, transitions, (de)serialization."""

from __future__ import annotations

import threading

import pytest

from otel_tokens import Estimate, InvalidTransitionError, TokenState, Usage


def test_fresh_state():
    s = TokenState(max_input_tokens=1000)
    assert s.status == "idle"
    assert (s.input_tokens, s.output_tokens, s.current_estimate) == (None, None, None)
    assert (s.turn_count, s.total_output_tokens, s.max_observed_input_tokens) == (0, 0, None)
    d = s.display()
    assert (d.tokens, d.percent, d.is_estimate) == (None, None, False)


def test_estimate_only_while_streaming_and_cleared_on_actual():
    s = TokenState(max_input_tokens=1000)
    h = s.start_streaming(Estimate(400, "full"))
    assert s.status == "streaming"
    assert s.current_estimate == Estimate(400, "full")
    d = s.display()
    assert (d.tokens, d.percent, d.is_estimate) == (400, 40.0, True)
    s.complete(Usage(input_tokens=420, output_tokens=10), h)
    assert s.status == "idle" and s.current_estimate is None
    d = s.display()
    assert (d.tokens, d.percent, d.is_estimate) == (420, 42.0, False)
    assert d.ratio == pytest.approx(0.42)


def test_failure_and_cancel_clear_estimate_and_count_no_turn():
    s = TokenState()
    s.complete(Usage(input_tokens=100, output_tokens=5))
    h = s.start_streaming(Estimate(200, "delta"))
    s.fail(h)
    assert s.current_estimate is None and s.status == "idle"
    h2 = s.start_streaming(Estimate(250, "delta"))
    s.cancel(h2)
    assert (s.turn_count, s.total_output_tokens, s.input_tokens) == (1, 5, 100)


def test_turns_totals_and_max_observed():
    s = TokenState()
    for inp, out in [(100, 10), (300, 20), (200, 30)]:
        s.complete(Usage(input_tokens=inp, output_tokens=out))
    assert s.turn_count == 3
    assert s.total_output_tokens == 60
    assert s.max_observed_input_tokens == 300
    assert (s.input_tokens, s.output_tokens) == (200, 30)


def test_input_only_from_reported_usage():
    s = TokenState()
    s.complete(Usage(input_tokens=100, output_tokens=1))
    s.complete(Usage(input_tokens=5000, output_tokens=2, source="estimated"))
    assert s.input_tokens == 100  # the estimate is never taken; the last reported value stays
    assert s.max_observed_input_tokens == 100
    assert s.turn_count == 2 and s.total_output_tokens == 3
    s.complete(Usage(input_tokens=150, output_tokens=1, source="parsed_text"))
    assert s.input_tokens == 150


def test_unknown_classes_keep_the_last_reported_values_and_count_the_turn():
    s = TokenState(max_input_tokens=100)
    s.complete(Usage(input_tokens=10))
    assert (s.turn_count, s.total_output_tokens, s.output_tokens) == (1, 0, None)
    s.complete(Usage(input_tokens=40, output_tokens=5))
    s.complete(Usage())  # a turn whose backend reported nothing
    assert (s.turn_count, s.input_tokens, s.output_tokens, s.total_output_tokens) == (3, 40, 5, 5)
    assert s.display().percent == 40.0


def test_set_estimate_replaces_and_latest_stream_is_shown():
    s = TokenState(max_input_tokens=100)
    a = s.start_streaming(Estimate(10, "full"))
    b = s.start_streaming(Estimate(20, "exact"))
    assert s.display().tokens == 20
    s.set_estimate(a, Estimate(30, "delta"))
    assert s.display().tokens == 30
    s.complete(Usage(input_tokens=31, output_tokens=1), a)
    assert s.status == "streaming"
    assert s.display().tokens == 20 and s.display().is_estimate
    s.complete(Usage(input_tokens=21, output_tokens=1), b)
    assert s.display() .tokens == 21 and not s.display().is_estimate


def test_streaming_without_estimate_displays_actual():
    s = TokenState(max_input_tokens=200)
    s.complete(Usage(input_tokens=50))
    h = s.start_streaming()
    d = s.display()
    assert (d.tokens, d.percent, d.is_estimate) == (50, 25.0, False)
    s.fail(h)


@pytest.mark.parametrize("window", [None, 1000, 3, 128_000])
def test_figures_match_the_properties_and_the_display(window):
    """figures() reads in one lock what the properties and display() give one by one; its
    utilization is exactly the display's ratio (the span and the gauge show one value);
    complete() returns them as they are right after the turn."""
    s = TokenState(max_input_tokens=window)

    def check() -> None:
        f = s.figures()
        assert f.turn_count == s.turn_count
        assert f.total_output_tokens == s.total_output_tokens
        assert f.max_observed_input_tokens == s.max_observed_input_tokens
        assert f.context_utilization == s.display().ratio  # exactly, not approximately

    check()
    assert s.complete(Usage(input_tokens=777, output_tokens=13)) == s.figures()  # the same read
    check()
    h = s.start_streaming(Estimate(1001, "full"))
    other = s.start_streaming(Estimate(2002, "full"))
    check()
    after = s.complete(Usage(input_tokens=333, output_tokens=7), h)
    assert after == s.figures() and after.turn_count == 2  # the other stream's estimate shown
    check()
    s.fail(other)
    check()
    assert s.figures().max_observed_input_tokens == 777 and s.figures().turn_count == 2


@pytest.mark.parametrize("action", ["complete", "fail", "set_estimate"])
def test_ending_a_stream_twice_is_an_invalid_transition(action):
    s = TokenState()
    h = s.start_streaming()
    s.complete(Usage(output_tokens=1), h)
    with pytest.raises(InvalidTransitionError, match="already ended"):
        if action == "complete":
            s.complete(Usage(output_tokens=1), h)
        elif action == "fail":
            s.fail(h)
        else:
            s.set_estimate(h, Estimate(1, "full"))
    assert s.turn_count == 1


def test_handle_of_another_state_is_rejected():
    a, b = TokenState(), TokenState()
    h = a.start_streaming()
    with pytest.raises(InvalidTransitionError, match="another TokenState"):
        b.complete(Usage(), h)


def test_bad_arguments_are_clear_errors():
    s = TokenState()
    with pytest.raises(TypeError, match="Usage"):
        s.complete({"input_tokens": 3})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="source"):
        Estimate(3, "guess")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="negative"):
        Estimate(-3, "full")
    with pytest.raises(ValueError, match="max_input_tokens"):
        TokenState(max_input_tokens=0)
    with pytest.raises(TypeError, match="Estimate"):
        s.start_streaming(123)  # type: ignore[arg-type]


def test_to_dict_uses_rfc_names():
    s = TokenState(max_input_tokens=1000)
    s.complete(Usage(input_tokens=100, output_tokens=7))
    h = s.start_streaming(Estimate(120, "delta"))
    assert s.to_dict() == {
        "inputTokens": 100, "outputTokens": 7, "maxInputTokens": 1000, "turnCount": 1,
        "totalOutputTokens": 7, "maxObservedInputTokens": 100, "status": "streaming",
        "currentEstimate": {"inputTokens": 120, "source": "delta"},
    }  # fmt: skip
    s.fail(h)
    restored = TokenState.from_dict(s.to_dict())
    assert restored.to_dict() == s.to_dict()


def test_from_dict_migrates_legacy_and_drops_stale_estimates():
    legacy = {
        "inputTokens": 900, "outputTokens": 40, "turnCount": 3, "totalOutputTokens": 120,
        "totalInputTokens": 2500, "estimatedInputTokens": 4000, "maxInputTokens": 10000,
        "status": "streaming", "currentEstimate": {"inputTokens": 4000, "source": "full"},
    }  # fmt: skip
    s = TokenState.from_dict(legacy)
    assert s.max_observed_input_tokens == 2500
    assert s.current_estimate is None and s.status == "idle"
    assert s.display().tokens == 900 and not s.display().is_estimate
    assert "totalInputTokens" not in s.to_dict()
    with pytest.raises(ValueError, match="bogus"):
        TokenState.from_dict({"bogus": 1})
    with pytest.raises(ValueError, match="turnCount"):
        TokenState.from_dict({"turnCount": -1})


def test_thread_safe_completions():
    s = TokenState()

    def work():
        for _ in range(5000):
            h = s.start_streaming(Estimate(5, "full"))
            s.complete(Usage(input_tokens=5, output_tokens=2), h)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.turn_count == 40_000
    assert s.total_output_tokens == 80_000
    assert s.status == "idle" and s.current_estimate is None
