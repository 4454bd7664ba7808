"""Number options of the CLI that are bounds (a timeout, a duration, a gate's threshold)."""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloat(click.ParamType):
    """A float option that refuses ``inf`` and ``nan`` in any spelling ``float()`` takes
    (``Infinity``, ``1e999``, ``NaN``): an infinite timeout never ends and nan passes no
    comparison, so either would turn the bound off without a word."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


FINITE_FLOAT = FiniteFloat()
