"""Usage: validation, None-ness, semconv meanings, sums."""

from __future__ import annotations

import inspect
import math
from dataclasses import FrozenInstanceError, fields
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_tokens import TOKEN_CLASSES, Usage


def test_unknown_stays_none_never_zero():
    u = Usage(output_tokens=7)
    assert u.input_tokens is None
    assert u.cache_read_tokens is None
    assert u.fresh_input_tokens is None
    assert u.total_tokens == 7


@pytest.mark.parametrize("field", TOKEN_CLASSES)
@pytest.mark.parametrize(
    "bad, words",
    [(-1, "negative"), (math.nan, "finite"), (math.inf, "finite"), (1.5, "whole"),
     (True, "boolean"), (False, "boolean"), ("12", "integer"), ([3], "integer")],
)  # fmt: skip
def test_bad_token_values_raise_naming_the_field(field, bad, words):
    with pytest.raises(ValueError) as info:
        Usage(**{field: bad})
    assert field in str(info.value)
    assert words in str(info.value)


def test_integral_floats_become_ints():
    u = Usage(input_tokens=12.0, output_tokens=3)
    assert u.input_tokens == 12 and type(u.input_tokens) is int


@pytest.mark.parametrize("field", ["cost_usd", "premium_requests"])
@pytest.mark.parametrize("bad", [-0.01, math.nan, math.inf, True, "1"])
def test_bad_amounts_raise(field, bad):
    with pytest.raises(ValueError, match=field):
        Usage(**{field: bad})


def test_amounts_accept_fractions_of_a_request():
    assert Usage(premium_requests=Fraction(1, 3)).premium_requests == pytest.approx(1 / 3)


def test_bad_source_and_labels():
    with pytest.raises(ValueError, match="source"):
        Usage(source="guessed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        Usage(model=4)  # type: ignore[arg-type]


def test_semconv_inclusive_meanings():
    u = Usage(input_tokens=1000, cache_read_tokens=600, cache_write_tokens=100,
              output_tokens=300, reasoning_tokens=120)  # fmt: skip
    assert u.fresh_input_tokens == 300
    assert u.total_tokens == 1300
    with pytest.raises(ValueError, match="must include cache_read_tokens"):
        Usage(input_tokens=10, cache_read_tokens=8, cache_write_tokens=3)
    with pytest.raises(ValueError, match="must include reasoning_tokens"):
        Usage(output_tokens=10, reasoning_tokens=11)


def test_fresh_input_treats_unreported_cache_as_no_cache():
    assert Usage(input_tokens=50).fresh_input_tokens == 50


def test_frozen():
    u = Usage(input_tokens=1)
    with pytest.raises(AttributeError):
        u.input_tokens = 2  # type: ignore[misc]


def test_addition_keeps_none_ness():
    a = Usage(input_tokens=5, cost_usd=0.5, model="m", provider="p")
    b = Usage(output_tokens=3, model="m", provider="q")
    s = a + b
    assert (s.input_tokens, s.output_tokens, s.cache_read_tokens) == (5, 3, None)
    assert s.cost_usd == 0.5
    assert s.model == "m" and s.provider is None
    assert (Usage() + Usage()).input_tokens is None


def test_sum_and_source_of_a_sum():
    parts = [Usage(input_tokens=1), Usage(input_tokens=2, source="estimated"), Usage(input_tokens=3)]
    total = sum(parts)
    assert isinstance(total, Usage)
    assert total.input_tokens == 6
    assert total.source == "estimated"
    assert (Usage(source="parsed_text") + Usage()).source == "parsed_text"
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]


def test_dict_round_trip_and_unknown_keys():
    u = Usage(input_tokens=3, output_tokens=None, response_id="r1", source="parsed_text")
    assert Usage.from_dict(u.to_dict()) == u
    with pytest.raises(ValueError, match="prompt_tokens"):
        Usage.from_dict({"prompt_tokens": 3})


def test_replace_validates():
    with pytest.raises(ValueError, match="output_tokens"):
        Usage(output_tokens=3).replace(output_tokens=-3)


_counts = st.one_of(st.none(), st.integers(min_value=0, max_value=10**9))


@given(st.lists(st.tuples(_counts, _counts), max_size=20))
def test_sum_matches_known_values(pairs):
    usages = [Usage(input_tokens=i, output_tokens=o) for i, o in pairs]
    total = sum(usages, Usage())
    known_in = [i for i, _ in pairs if i is not None]
    assert total.input_tokens == (sum(known_in) if known_in else None)


def test_hand_written_init_matches_the_fields():
    """``Usage.__init__`` is written out (it is cheaper than the generated one): it must take
    exactly the dataclass fields, in order, with their defaults, and set every one."""
    params = list(inspect.signature(Usage.__init__).parameters.values())[1:]
    assert [(p.name, p.default, p.kind) for p in params] == [
        (f.name, f.default, inspect.Parameter.POSITIONAL_OR_KEYWORD) for f in fields(Usage)
    ]
    values = {f.name: i for i, f in enumerate(fields(Usage)) if f.name in TOKEN_CLASSES}
    values.update(input_tokens=100, output_tokens=50, premium_requests=1.5, cost_usd=0.25,
                  model="m", provider="p", response_id="r", source="estimated")  # fmt: skip
    assert Usage(**values).to_dict() == values  # every field set, none swapped
    assert Usage(*values.values()) == Usage(**values)  # positionally too, in field order
    with pytest.raises(FrozenInstanceError):
        Usage().input_tokens = 1  # type: ignore[misc]
    with pytest.raises(ValueError, match="cache_read_tokens"):
        Usage(input_tokens=1, cache_read_tokens=2)  # validation still runs


def test_a_new_record_is_a_frozen_usage_and_a_subclass_keeps_its_own_type():
    """A new record is a Usage, frozen, equal to one built from a dict, its counts normalized
    (12.0 is 12); a subclass (another layout) stays of its own type, checked and frozen too."""
    record = Usage(12.0, 5, 0, None, 0, None, None, "m", None, "r")
    assert type(record) is Usage and type(record.input_tokens) is int and record.input_tokens == 12
    assert record == Usage.from_dict(record.to_dict())
    with pytest.raises(FrozenInstanceError):
        record.model = "other"  # type: ignore[misc]

    class Tagged(Usage):
        __slots__ = ("tag",)

    tagged = Tagged(3, 2, model="m", source="estimated")
    assert type(tagged) is Tagged
    assert (tagged.input_tokens, tagged.output_tokens, tagged.model, tagged.source) == (
        3, 2, "m", "estimated")  # fmt: skip
    with pytest.raises(FrozenInstanceError):
        tagged.input_tokens = 4  # type: ignore[misc]


# -- the one coercion rule (check_token_count; check_token_text for counts sent as text) -------

@pytest.mark.parametrize("value, expected", [
    (0, 0), (10, 10), (12.0, 12), (2**63 - 1, 2**63 - 1), (None, None),
    (True, ValueError), (False, ValueError), (10.7, ValueError), (-0.5, ValueError),
    ("10", ValueError), ("", ValueError), (b"10", ValueError), (math.nan, ValueError),
    (-1, ValueError), (2**63, ValueError), (Fraction(3, 1), ValueError), ([1], ValueError),
])  # fmt: skip
def test_the_coercion_rule_for_a_count_as_sent(value, expected):
    from otel_tokens.usage import check_token_count

    if expected is ValueError:
        with pytest.raises(ValueError, match="input_tokens"):
            check_token_count("input_tokens", value)
    else:
        got = check_token_count("input_tokens", value)
        assert got == expected and (got is None or type(got) is int)


@pytest.mark.parametrize("text, expected", [
    ("10", 10), (" 42 ", 42), ("0", 0), (b"7", 7), (None, None), (5, 5),
    ("10.7", ValueError), ("+5", ValueError), ("-1", ValueError), ("1_0", ValueError),
    ("true", ValueError), ("", ValueError), ("١٢", ValueError), ("1e3", ValueError),
    (str(2**63), ValueError), (True, ValueError), (10.5, ValueError),
])  # fmt: skip
def test_the_same_rule_for_a_count_sent_as_text(text, expected):
    from otel_tokens.usage import check_token_text

    if expected is ValueError:
        with pytest.raises(ValueError, match="x-amzn-bedrock-input-token-count"):
            check_token_text("x-amzn-bedrock-input-token-count", text)
    else:
        assert check_token_text("x-amzn-bedrock-input-token-count", text) == expected


# -- a usage block as sent (check_sent_usage: one loop over the common block, else the full walk) --

_OPENAI = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
           "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": None},
           "completion_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip


@pytest.mark.parametrize("block, named", [
    (_OPENAI, None), ({}, None), ([_OPENAI, _OPENAI], None),
    ({**_OPENAI, "total_tokens": 2**70}, None),  # totals are not recorded, not checked
    ({**_OPENAI, "created": -5}, None),  # not a count's name
    ({**_OPENAI, "prompt_tokens": -5}, "prompt_tokens"),
    ({**_OPENAI, "prompt_tokens": 2**63}, "prompt_tokens"),
    ({**_OPENAI, "prompt_tokens": True}, "prompt_tokens"),
    ({**_OPENAI, "completion_tokens": "10"}, "completion_tokens"),
    ({**_OPENAI, "prompt_tokens_details": {"cached_tokens": -1}}, "cached_tokens"),
    ({**_OPENAI, "prompt_tokens_details": {"cached_tokens": 1.5}}, "cached_tokens"),
    ({**_OPENAI, "prompt_tokens_details": {"x": {"audio_tokens": -1}}}, "audio_tokens"),
    ({"promptTokensDetails": [{"modality": "TEXT", "tokenCount": -3}]}, "tokenCount"),
])  # fmt: skip
def test_a_usage_block_as_sent(block, named):
    from otel_tokens.usage import check_sent_usage

    if named is None:
        check_sent_usage(block)
    else:
        with pytest.raises(ValueError, match=named):
            check_sent_usage(block)


_NAMES = st.sampled_from(["prompt_tokens", "cached_tokens", "total_tokens", "tokenCount",
                          "modality", "prompt_tokens_details", "Total_Tokens", "created"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3),
                    st.integers(2**63 - 2, 2**63 + 1),
                    st.sampled_from(["10", "TEXT", 10.7, 12.0, math.inf]))  # fmt: skip
_BLOCKS = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_NAMES, inner, max_size=5)), max_leaves=12)


@given(_BLOCKS)
def test_the_common_block_check_agrees_with_the_full_walk(block):
    """The fast check passes only what the full walk passes, and otherwise the walk decides."""
    from otel_tokens.usage import _check_sent, check_sent_usage

    def outcome(check):
        try:
            check(block)
        except ValueError as exc:
            return str(exc)
        return None

    assert outcome(check_sent_usage) == outcome(_check_sent)
