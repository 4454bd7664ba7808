"""The conformance apps' own embeddings, so that no model is needed: unit vectors of word counts over
the corpus' vocabulary (words of four letters or more)."""

from __future__ import annotations

import re
from collections.abc import Iterable


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 3]


class WordVectors:
    """Embeds texts over the vocabulary of ``corpus``."""

    def __init__(self, corpus: Iterable[str]) -> None:
        self.vocabulary = sorted({w for text in corpus for w in words(text)})

    @property
    def dimension(self) -> int:
        return len(self.vocabulary)

    def embed(self, text: str) -> list[float]:
        counts = [float(words(text).count(w)) for w in self.vocabulary]
        norm = sum(c * c for c in counts) ** 0.5 or 1.0
        return [c / norm for c in counts]
