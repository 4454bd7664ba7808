"""How far the mapping follows nesting (`span_levels.MAX_DEPTH`, docs/events.md): an enclosing
level is looked for through at most 256 ancestors, and levels are followed at most 256 deep;
an enclosing model call likewise through at most 256 ancestors.
No framework nests near that deep; the bounds keep a crafted trace from making the mapping's
work unbounded, and they are where docs/events.md says."""

from __future__ import annotations

from tests.collectors.test_span_mapping import ids, mapped, retriever, span


def test_an_enclosing_retriever_is_found_through_at_most_256_ancestors():
    def lists(between: int) -> list[list[str]]:
        # an outer retriever, `between` spans of another kind, then the same retriever inside
        chain = [retriever(1, None, "Store.retrieve", 0, 1000, {"id": "a"})]
        chain += [span(2 + i, 1 + i, "step", 1, 999) for i in range(between)]
        chain.append(retriever(2 + between, 1 + between, "Store.retrieve", 2, 998, {"id": "a"}, {"id": "b"}))
        return ids(mapped(*chain).event)

    # the outer retriever is the inner one's 256th ancestor: one retrieval, the outermost's list
    assert lists(255) == [["a"]]
    # its 257th: not looked for, so two retrievals, in the order they completed
    assert lists(256) == [["a", "b"], ["a"]]


def test_levels_are_followed_at_most_256_deep():
    def lists(empty: int) -> list[list[str]]:
        # `empty` nested levels of one retriever whose spans list no documents (OpenInference
        # writes nothing for an empty list, so they cannot say what they held), and another
        # retriever's list inside the innermost, which then stands for what the caller got
        chain = [retriever(1 + i, i or None, "Fusion.retrieve", i, 2000 - i) for i in range(empty)]
        chain.append(retriever(1 + empty, empty, "Store.search", empty, 2000 - empty, {"id": "x"}))
        return ids(mapped(*chain).event)

    # the source sits 257 levels deep (below the outermost, at depth 0, and 256 more): reached
    assert lists(257) == [["x"]]
    # one level deeper: cut, and nothing below the outermost says what it held
    assert lists(258) == [[]]


def test_a_generation_is_counted_once_through_at_most_256_ancestors():
    def generate_ms(between: int) -> float:
        # a model call (50 ms), `between` spans of another kind, then a nested call of it (10 ms)
        chain = [span(1, None, "query", 0, 1000, openinference__span__kind="CHAIN"),
                 retriever(2, 1, "retrieve", 1, 5, {"id": "d"}),
                 span(3, 1, "LLM.predict", 10, 60, openinference__span__kind="LLM")]
        chain += [span(4 + i, 3 + i, "step", 11, 59) for i in range(between)]
        chain.append(span(4 + between, 3 + between, "LLM.complete", 20, 30, openinference__span__kind="LLM"))
        return mapped(*chain).event["latency_ms"]["generate"]

    # the outer call is the inner one's 256th ancestor: one generation, its duration
    assert generate_ms(255) == 50
    # its 257th: not looked for, so two generations
    assert generate_ms(256) == 60
