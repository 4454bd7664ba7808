"""Canary permission probes (docs/scheduler.md): configured queries run as test identities against the RAG
system's retrieval, judged against what each identity must and must not retrieve.

The retrieval itself is passed in (``Retrieve``): an HTTP endpoint or a Python callable, built in
``ragmon.monitor.app.probe_clients``. A probe fails as a **leak** when a result matches a ``must_not_retrieve``
pattern (critical), as a **miss** when a ``must_retrieve`` pattern matches nothing, and as an
**error** when the retrieval could not be asked (timeout, refused, bad answer).
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ragmon.monitor.config.scheduling import ProbeConfig


class ProbeError(Exception):
    """The retrieval could not be asked or gave an unusable answer; the message says which."""


Retrieve = Callable[[ProbeConfig], list[str]]  # the document ids retrieved, in rank order; raises ProbeError


@dataclass
class ProbeResult:
    name: str
    tenant: str
    verdict: Literal["ok", "leak", "miss", "error"]
    seconds: float
    retrieved: int = 0
    leaked: list[str] = field(default_factory=list)  # document ids matching must_not_retrieve
    missing: list[str] = field(default_factory=list)  # must_retrieve patterns nothing matched
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


def judge(probe: ProbeConfig, doc_ids: Sequence[str], seconds: float) -> ProbeResult:
    """The verdict on one probe's results. A leak outranks a miss."""
    leaked = sorted({d for d in doc_ids if any(fnmatch.fnmatchcase(d, p) for p in probe.must_not_retrieve)})
    missing = [p for p in probe.must_retrieve if not any(fnmatch.fnmatchcase(d, p) for d in doc_ids)]
    verdict = "leak" if leaked else "miss" if missing else "ok"
    return ProbeResult(probe.name, probe.identity.tenant, verdict, seconds, len(doc_ids), leaked, missing)


def run_probes(probes: Sequence[ProbeConfig], retrieve: Retrieve,
               clock: Callable[[], float] = time.monotonic) -> list[ProbeResult]:
    """Run every probe once, in order; one probe's failure never stops the others."""
    results = []
    for probe in probes:
        started = clock()
        try:
            doc_ids = retrieve(probe)
        except ProbeError as error:
            results.append(ProbeResult(probe.name, probe.identity.tenant, "error", clock() - started,
                                       error=str(error)))
            continue
        results.append(judge(probe, doc_ids, clock() - started))
    return results
