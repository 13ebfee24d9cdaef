"""Token counts of text: exact with tiktoken when its encoding is loaded, else a fast heuristic.

The heuristic does no per-character Python work: the UTF-8 bytes are mapped to character
classes with one ``bytes.translate`` and counted with ``bytes.count``: upper-case letters,
digits, spaces, newlines, punctuation, and three two-byte transitions (punctuation runs,
indentation runs, digit groups); lower-case letters are what remains, and
multi-byte characters are counted only in non-ASCII text. The weights were fitted by least
squares against tiktoken's ``o200k_base`` on this project's source, documents, agent-CLI
samples, recorded API messages and multilingual lines (held-out error for texts of 100+
tokens: 3.9% mean, 3.4% token-weighted). Word-start and camelCase features were dropped:
they gained a fraction of a point for a third of the time.
"""

from __future__ import annotations

__all__ = ["heuristic_tokens"]


def _class_table() -> bytes:
    table = bytearray(256)
    for b in range(256):
        c = chr(b)
        if b >= 0xF0:
            k = "D"  # lead byte of a 4-byte character (emoji, rare scripts)
        elif b >= 0xE0:
            k = "C"  # 3-byte character (CJK, most of the BMP)
        elif b >= 0xC0:
            k = "B"  # 2-byte character (accented Latin, Cyrillic, Greek, ...)
        elif b >= 0x80:
            k = "x"  # continuation byte: not counted
        elif c.isalpha():
            k = "a" if c.islower() else "A"
        elif c.isdigit():
            k = "d"
        elif c in " \t\r\x0b\x0c":
            k = " "
        elif c == "\n":
            k = "n"
        else:
            k = "p"
        table[b] = ord(k)
    return bytes(table)


_TABLE = _class_table()
# tokens per occurrence of each class (fitted; see the module docstring)
_LOWER = 0.0744  # lower-case letter (counted as what remains, in ASCII text)
_UPPER = 0.1524  # upper-case letter
_DIGIT = 1.9148  # digit
_SPACE = 0.5571  # space or tab
_NEWLINE = 0.8034  # newline
_PUNCT = 1.0744  # punctuation or symbol
_PUNCT_RUN = -1.4259  # two punctuation marks in a row merge
_INDENT_RUN = -0.9473  # two spaces in a row merge
_DIGIT_RUN = -2.9760  # digits group by up to three
_TWO_BYTE = 0.3126  # 2-byte character (accented Latin, Cyrillic, Greek, ...)
_THREE_BYTE = 0.6852  # 3-byte character (CJK, most of the BMP)
_FOUR_BYTE = 1.5  # 4-byte character (set, not fitted: too rare in the corpus)
#: A text's first word has no space before it: one token for the start of every text.
TEXT_START = 1.0


def heuristic_tokens(text: str) -> int:
    """Estimated o200k-style token count of ``text`` (0 for empty text, else at least 1)."""
    if not text:
        return 0
    c = text.encode("utf-8", "surrogatepass").translate(_TABLE)
    upper, digit, space = c.count(b"A"), c.count(b"d"), c.count(b" ")
    newline, punct = c.count(b"n"), c.count(b"p")
    total = (
        TEXT_START + upper * _UPPER + digit * _DIGIT + space * _SPACE + newline * _NEWLINE
        + punct * _PUNCT + c.count(b"pp") * _PUNCT_RUN
        + c.count(b"  ") * _INDENT_RUN + c.count(b"dd") * _DIGIT_RUN
    )  # fmt: skip
    if text.isascii():
        total += (len(c) - upper - digit - space - newline - punct) * _LOWER
    else:
        total += (
            c.count(b"a") * _LOWER + c.count(b"B") * _TWO_BYTE + c.count(b"C") * _THREE_BYTE
            + c.count(b"D") * _FOUR_BYTE
        )  # fmt: skip
    n = round(total)
    return n if n > 0 else 1
