"""How text becomes the words of the full-text index (memory/fulltext.py), in every script.

FTS5's unicode61 tokenizer splits at anything that is not a letter or a digit. Chinese and
Japanese put no space between words (Korean joins particles to them), so a whole line of OCR
or a transcript sentence would be one token and no phrase inside it could be found. Here each
character of those scripts (Han, kana, Hangul, Bopomofo: ``CJK``) is set apart as a word of its
own before the text reaches the tokenizer; the index holds single characters and a phrase
query of them ("出口" is the phrase "出 口") finds the characters adjacent and in order, from
one character on (no n-gram minimum), beside Latin words in the same phrase ("Exit 出口 B2").

Text is NFKC-normalized first, as OCR of East Asian signs often reads full-width forms: "Ｂ２"
is indexed and searched as "B2". Query words (``terms``, used by the "all" and "any" modes) are
the Latin words and, for a run of CJK characters, its overlapping pairs ("出口在左边": 出口, 口在,
在左, 左边) or the character alone: every pair anywhere ("all") approximates every word, and one
pair ("any") a partial match ranked by bm25 on how many pairs a document holds.
"""
from __future__ import annotations

import re
import unicodedata

MAX_TERMS = 64  # words of a query used at most
CJK = ("\u1100-\u11ff"      # Hangul Jamo
       "\u3005-\u3007"      # 々 〆 〇
       "\u3021-\u3029\u3031-\u3035\u303b\u303c"  # Hangzhou numerals, kana repeat marks
       "\u3040-\u30ff"      # Hiragana, Katakana
       "\u3100-\u312f\u3130-\u318f\u31a0-\u31bf"  # Bopomofo, Hangul compatibility Jamo
       "\u31f0-\u31ff"      # Katakana phonetic extensions
       "\u3400-\u4dbf\u4e00-\u9fff"  # CJK unified ideographs (and extension A)
       "\ua960-\ua97f\uac00-\ud7ff"  # Hangul syllables and Jamo extensions
       "\uf900-\ufaff"      # CJK compatibility ideographs
       "\uff66-\uff9f"      # half-width Katakana (NFKC makes them full-width)
       "\U00020000-\U0003134f")  # CJK unified ideographs, extensions B to G
_CJK_CHAR = re.compile(f"([{CJK}])")
_CJK_RUN = re.compile(f"[{CJK}]+")
_WORD = re.compile(r"[^\W_]+")  # what unicode61 calls a token: letters and digits


def index_text(text: str) -> str:
    """``text`` as the index tokenizes it: NFKC-normalized, each CJK character set apart by
    spaces (the text a document is indexed by and a phrase is matched against)."""
    return _CJK_CHAR.sub(r" \1 ", unicodedata.normalize("NFKC", str(text)))


def split_words(text: str) -> list[str]:
    """The words of ``text`` in order, as the index holds them: lower case, each CJK character
    a word (a speech monitor's quoted words are matched on these too)."""
    return _WORD.findall(index_text(text).lower())


def tokens(text: str) -> list[str]:
    """The index's tokens of ``text``, in order (at most MAX_TERMS): what a phrase query of it
    must find adjacent."""
    return split_words(text)[:MAX_TERMS]


def terms(text: str) -> list[str]:
    """The query words of ``text`` (lower case; at most MAX_TERMS): its Latin words, and the
    overlapping character pairs of each CJK run (a run of one character: that character)."""
    out: list[str] = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", str(text)).lower()):
        at = 0
        for run in _CJK_RUN.finditer(word):
            if run.start() > at:
                out.append(word[at:run.start()])
            chars = run.group()
            out += [chars] if len(chars) == 1 else [chars[i:i + 2] for i in range(len(chars) - 1)]
            at = run.end()
        if at < len(word):
            out.append(word[at:])
    return out[:MAX_TERMS]


def term_tokens(term: str) -> list[str]:
    """The index tokens one query word stands for (a CJK pair: its two characters)."""
    return _WORD.findall(index_text(term))
