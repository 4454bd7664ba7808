"""ISO 8601 weeks, the unit of the labeling loop: samples are filed under the week of their trace in
``sampling.time_zone``, quotas count per week, and the weekly job pulls the week before."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

_WEEK = re.compile(r"(\d{4})-W(\d{2})")


def iso_week(unix_seconds: float, time_zone: str = "UTC") -> str:
    """The ISO 8601 week (``2026-W48``) of an instant in a time zone; around New Year the ISO year
    can differ from the calendar year (2027-01-01 is in 2026-W53)."""
    return _week_of(datetime.fromtimestamp(unix_seconds, ZoneInfo(time_zone)).date())


def week_monday(week: str) -> date:
    """The Monday of an ISO week given as ``YYYY-Www``; ValueError for anything else."""
    match = _WEEK.fullmatch(week)
    if match is None:
        raise ValueError(f"not an ISO week like 2026-W48: {week!r}")
    return date.fromisocalendar(int(match[1]), int(match[2]), 1)


def previous_week(week: str) -> str:
    """The ISO week before ``week``."""
    return _week_of(week_monday(week) - timedelta(days=7))


def previous_week_of(now: float, time_zone: str) -> str:
    """The ISO week before the one holding ``now``: the weekly job's week. With ``time_zone`` the
    zone samples are filed in, the job never takes a week the sampler is still filling."""
    return previous_week(iso_week(now, time_zone))


def _week_of(day: date) -> str:
    year, week, _ = day.isocalendar()
    return f"{year:04d}-W{week:02d}"
