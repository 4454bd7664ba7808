"""The LlamaIndex node postprocessors the apps share. Import it after the instrumentation is set up,
as the apps import LlamaIndex itself."""

from __future__ import annotations

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

dispatcher = get_dispatcher(__name__)


class Recorder(BaseNodePostprocessor):
    """Passes nodes through, keeping what it saw (the retriever's list, for the report)."""

    seen: list[list[NodeWithScore]] = []

    def _postprocess_nodes(self, nodes, query_bundle=None):
        self.seen.append(list(nodes))
        return nodes


class KeywordOverlapRerank(BaseNodePostprocessor):
    """Reorders nodes by the share of query words they contain and keeps the best ``top_n``,
    dispatching LlamaIndex's rerank events as its built-in rerankers do (so the instrumentation
    reports a reranker span). ``seen``: the lists it was given."""

    top_n: int = 1
    seen: list[list[NodeWithScore]] = []

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n,
                                          model_name="keyword-overlap"))
        words = set(query_bundle.query_str.lower().split()) if query_bundle else set()
        scored = [NodeWithScore(node=n.node, score=len(words & set(n.node.get_content().lower().split())) / 10)
                  for n in nodes]
        kept = sorted(scored, key=lambda n: n.score, reverse=True)[: self.top_n]
        self.seen.append(list(nodes))
        dispatcher.event(ReRankEndEvent(nodes=kept))
        return kept
