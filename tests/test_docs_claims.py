"""What the docs name must exist in the code: every `ragmon_…` metric, every configuration key
(`section.key`, `RAGMON_SECTION__KEY`) and every `ragmon …` command line's subcommands and flags,
in README.md and docs/, the generated references included (they carry the descriptions written in
the code: `findings.per_signal_per_second` once named a series that does not exist)."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import click
import pytest
import yaml
from pydantic import BaseModel

from ragmon.exporters.metrics import METRICS
from ragmon.monitor.app.cli import main as cli
from ragmon.monitor.config.settings import Settings

ROOT = Path(__file__).parent.parent
PROSE = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
HELM_VALUES = yaml.safe_load((ROOT / "helm" / "ragmon" / "values.yaml").read_text())

_METRIC = re.compile(r"\bragmon_[a-z0-9_]+\b")
_CODE = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"[a-z][a-z_]*(?:\.[a-z][a-z0-9_]*)+")
_ENV = re.compile(r"\bRAGMON_([A-Z][A-Z0-9_]*)__([A-Z0-9_]+)\b")
# a command line starts with it: after a prompt, variables set for it, or a path to the executable
_COMMAND = re.compile(r"^\s*(?:\$\s+)?(?:[A-Z][A-Z0-9_]*=\S*\s+)*(?:[\w./-]*/)?ragmon((?: [a-z][a-z-]*)+)(.*)$")
_FILE = re.compile(r".*\.(?:py|md|json|jsonl|yaml|yml|toml|txt|xml|csv|sh|db|key|html)$")


def _metric_names() -> set[str]:
    names = set()
    for spec in METRICS:
        names |= {spec.name, *(spec.name + suffix for suffix in ("_bucket", "_count", "_sum", "_created"))}
        names.add(spec.name.removesuffix("_total"))  # "the ragmon_findings counter" style mentions
    return names


def _model_of(annotation: typing.Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _config_path_exists(parts: list[str]) -> bool:
    """Whether ``parts`` names a settings field (the rest of a dict-valued field is its keys)."""
    model: type[BaseModel] | None = Settings
    for depth, part in enumerate(parts):
        if model is None:
            return depth > 1  # inside a mapping or a list of a field: keys are the user's
        field = model.model_fields.get(part)
        if field is None:
            return False
        model = _model_of(field.annotation)
    return True


def _helm_path_exists(parts: list[str]) -> bool:
    node: typing.Any = HELM_VALUES
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _mentions(pattern: re.Pattern[str], group: int = 0):
    for path in PROSE:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in pattern.finditer(line):
                yield f"{path.relative_to(ROOT)}:{number}", match.group(group), line


def test_every_metric_the_docs_name_is_exported():
    known = _metric_names()
    unknown = sorted({(where, name) for where, name, _ in _mentions(_METRIC) if name not in known})
    assert not unknown, f"metrics named in the docs that ragmon does not export: {unknown}"


def test_every_configuration_key_the_docs_name_exists():
    sections = set(Settings.model_fields)
    unknown = []
    for where, code, _ in _mentions(_CODE, 1):
        for dotted in _DOTTED.fullmatch(code.strip()) and [code.strip()] or []:
            parts = dotted.split(".")
            if parts[0] not in sections or _FILE.fullmatch(dotted):
                continue  # a file name, a module, a label: not a configuration key
            if not _config_path_exists(parts) and not _helm_path_exists(parts):
                unknown.append((where, dotted))
    for where, section, key, _ in ((w, m.group(1), m.group(2), line) for w, m, line in _env_mentions()):
        if section == "SECTION":
            continue  # the form itself: RAGMON_SECTION__KEY
        if not _config_path_exists([section.lower(), key.lower()]):
            unknown.append((where, f"RAGMON_{section}__{key}"))
    assert not unknown, f"configuration keys named in the docs that the settings do not have: {unknown}"


def _env_mentions():
    for path in PROSE:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in _ENV.finditer(line):
                yield f"{path.relative_to(ROOT)}:{number}", match, line


def _command_lines():
    """Each `ragmon …` command line in the docs: in a code block, or in one backtick span."""
    for path in PROSE:
        fenced = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            where = f"{path.relative_to(ROOT)}:{number}"
            if fenced:
                yield where, line.split(" #")[0]
            else:
                for span in _CODE.findall(line):
                    yield where, span


def _resolve(words: list[str]) -> tuple[click.Command, list[click.Command], list[str]]:
    """The deepest command ``words`` name, the commands on the way, and the words left over."""
    command: click.Command = cli
    path = [cli]
    rest = list(words)
    while rest and isinstance(command, click.Group) and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
        path.append(command)
    return command, path, rest


def test_every_command_and_flag_the_docs_show_exists():
    unknown = []
    checked = 0
    for where, text in _command_lines():
        for segment in re.split(r"[|;&]|\$\(", text):
            match = _COMMAND.search(segment)
            if match is None:
                continue
            command, path, rest = _resolve(match.group(1).split())
            if isinstance(command, click.Group) and rest and rest[0] not in command.commands \
                    and command is not cli:
                unknown.append((where, f"ragmon {match.group(1).strip()}: no subcommand {rest[0]!r}"))
                continue
            if command is cli:
                if rest:
                    unknown.append((where, f"ragmon {rest[0]}: no such command"))
                continue
            options = {opt for c in path for p in c.params for opt in (*p.opts, *p.secondary_opts)}
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", match.group(1) + match.group(2)):
                checked += 1
                if flag not in options:
                    unknown.append((where, f"{' '.join(c.name for c in path[1:])}: no flag {flag}"))
    assert checked > 20, "the command lines of the docs were not found"
    assert not unknown, f"command lines in the docs that the CLI does not take: {unknown}"


@pytest.mark.parametrize("claim, exists", [
    (["findings", "per_signal_per_second"], True), (["findings", "per_signal"], False),
    (["dead_letter", "keep_raw"], True), (["alerts", "push_labels", "namespace"], True),
    (["scheduler", "persistence"], False),
])
def test_the_configuration_lookup_itself(claim, exists):
    assert _config_path_exists(claim) is exists
