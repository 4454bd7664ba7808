"""The words the rewrite signal compares (docs/signals.md, "Rewrite"): content terms, and a text's
words in order for telling a query that repeats the chat history word for word.

A **content term** is a word of the text, case-folded (``str.casefold``: ``Straße`` and ``STRASSE``
are one term), that is not a stopword of :data:`STOPWORDS` and is longer than one character (a lone
letter or digit names nothing). Words are runs of word characters (letters, digits, ``_``), so
punctuation splits them (``vacation-days`` is two terms) and a number is a term of its own
(``2026``, ``25th``, ``401k``). Scripts written without spaces between words (Chinese, Japanese
kana, Thai) have no words to split on: a run of them gives its overlapping pairs of characters (a
single character alone), the usual stand-in for words in search engines.

Only English stopwords are dropped: a function word of another language counts as a content term,
so in other languages a rewrite that shares only such words with the conversation is judged to have
kept something. The signal then says "kept" where it could have said "lost", never the reverse.
"""

from __future__ import annotations

import re

# Han, kana (Hiragana, Katakana), Thai: written without spaces between words
_UNSPACED = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORDS = re.compile(rf"[{_UNSPACED}]+|[^\W{_UNSPACED}]+")
_UNSPACED_RUN = re.compile(rf"[{_UNSPACED}]")

#: English function words, question words, and the filler of chat messages ("please", "thanks").
_STOPWORDS = """
a about above after again against all also am an and any are aren as at be because been before being below
between both but by can cannot could couldn did didn do does doesn doing don down during each else even ever
every few for from further get gets got had hadn has hasn have haven having he her here hers herself him himself
his how however if in into is isn it its itself just let like ll many may me might more most much must mustn my
myself need no nor not now of off on once one only or other ought our ours ourselves out over own please re
same shall shan she should shouldn so some such tell than thank thanks that the their theirs them themselves then
there these they thing things this those through to too under until up upon us ve very via want was wasn way we
were weren what whatever when where whether which while who whom whose why will with within without won would
wouldn yes yet you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORDS.split())

#: The speaker tags chat frameworks write when they format a history as text (LangChain's
#: ``Human:``/``AI:``, LlamaIndex's ``user:``/``assistant:``): left out when a query is compared
#: with the history word for word.
ROLE_WORDS = frozenset({"human", "ai", "user", "assistant", "system"})

MAX_TERMS = 128  # content terms taken from one text: the memory of a turn stays small whatever its size


def words(text: str) -> list[str]:
    """The text's words in order, case-folded; a run of a script without spaces as its pairs of
    characters."""
    folded = text.casefold()
    if _UNSPACED_RUN.search(folded) is None:  # the common case: every word is a word
        return _WORDS.findall(folded)
    out: list[str] = []
    for word in _WORDS.findall(folded):
        if len(word) > 2 and _UNSPACED_RUN.match(word):
            out += (word[i:i + 2] for i in range(len(word) - 1))
        else:
            out.append(word)
    return out


def is_content(word: str) -> bool:
    """Whether a word of :func:`words` is a content term."""
    return word not in STOPWORDS and (len(word) > 1 or _UNSPACED_RUN.match(word) is not None)


def content_words(text: str) -> list[str]:
    """The content terms of a text, distinct, in the order they first appear (see the module)."""
    return list(dict.fromkeys(w for w in words(text) if is_content(w)))
