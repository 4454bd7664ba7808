"""The base of every configuration section (kept apart so that modules owning a section can
define it without importing the whole configuration), and value types several sections share."""

from typing import Annotated
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, ConfigDict


class ConfigSection(BaseModel):
    """Unknown keys are errors; assignments are validated; no float, in a field or inside a list or
    mapping, is ``inf`` or ``nan``, however spelt (``.inf``, ``Infinity``, ``1e999``)."""

    # A bound of inf turns its check off (an endless body timeout, no rate limit), and nan passes
    # no comparison at all, so neither is a setting: both are refused with the key they were given for.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


def _zone_exists(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (an IANA name such as UTC or Europe/Berlin)") from None
    return name


def _http_url(value: str) -> str:
    if urlsplit(value).scheme not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    return value


TimeZoneName = Annotated[str, AfterValidator(_zone_exists)]
HttpUrlText = Annotated[str, AfterValidator(_http_url)]
