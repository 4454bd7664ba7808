"""The base of every configuration section (kept apart so that modules owning a section can
define it without importing the whole configuration)."""

from pydantic import BaseModel, ConfigDict


class ConfigSection(BaseModel):
    """Unknown keys are errors; assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
