"""Where an alert's traces are, for a person to follow: the read API query (``findings_query``) and
the command to paste into a shell (``findings_command``), for the alert's tenant and index.

A tenant or index name is chosen by whoever sends traces, so it may hold anything: quotes,
``$(...)``, backticks, a newline. Every value is therefore quoted for a POSIX shell by the rules of
:func:`shlex.quote` (a value of only ASCII letters and digits and ``@%+=:,./-_`` as it is, any
other in single quotes with each ``'`` written ``'"'"'``), so that pasted, it is one argument and
never code; and it is URL-encoded in the query (as Go's ``url.QueryEscape``:
:func:`urllib.parse.quote_plus` with nothing left safe).

Both paths build their text with :func:`_links`: the rules as a Go template that Prometheus fills
with the alert's labels (:func:`templated`), the direct push with the values themselves
(:func:`filled`). For the same value both give the same text, byte for byte: Go's ``\\w`` is ASCII,
as :func:`shlex.quote`'s is, and its ``$`` matches only at the very end, so a value ending in a
newline is quoted (tests/alerts/test_pasted_commands.py checks it through the real promtool).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from urllib.parse import quote_plus

# what shlex.quote leaves as it is (it matches the complement of this class with re.ASCII)
SHELL_SAFE = r"^[\w@%+=:,./-]+$"
# shlex.quote's stand-in for a ' inside single quotes: close, a ' in double quotes, reopen
QUOTED_QUOTE = "'\"'\"'"


def _shell_template(label: str) -> str:
    """Go template text that renders label ``label`` as :func:`shlex.quote` would. Raw strings
    (backticks) hold the pattern and the replacement; the replacement has no ``$``, which
    ``reReplaceAll`` would expand."""
    value = f"$labels.{label}"
    return ("{{ if match `" + SHELL_SAFE + "` " + value + " }}{{ " + value + " }}{{ else }}"
            "'{{ reReplaceAll \"'\" `" + QUOTED_QUOTE + "` " + value + " }}'{{ end }}")


def _url_template(label: str) -> str:
    return "{{ $labels." + label + " | urlquery }}"


def _url_quote(value: str) -> str:
    return quote_plus(value, safe="")


def _links(signal: str, tenant: str, index: str, shell: Callable[[str], str],
           url: Callable[[str], str]) -> dict[str, str]:
    return {"findings_query": f"/api/v1/findings?signal={signal}&tenant={url(tenant)}&index={url(index)}",
            "findings_command": f"ragmon findings list --signal {signal} --tenant {shell(tenant)} "
                                f"--index {shell(index)} --since 2h"}


def templated(signal: str) -> dict[str, str]:
    """The links of a rule for findings ``signal``, as Go templates over the alert's ``tenant``
    and ``index`` labels (Prometheus fills them when the alert fires)."""
    return _links(signal, "tenant", "index", _shell_template, _url_template)


def filled(signal: str, tenant: str, index: str) -> dict[str, str]:
    """The links of a pushed alert for findings ``signal`` in ``tenant`` and ``index`` (their
    shown ids): the text :func:`templated` renders to for the same labels."""
    return _links(signal, tenant, index, shlex.quote, _url_quote)
