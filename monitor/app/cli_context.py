"""What the CLI's command groups share: the settings of the invocation, and the stores and clients
built from them, each failing as a usage error that names the setting."""

from __future__ import annotations

import click

from ragmon.exporters.label_studio import LabelStudio
from ragmon.monitor.config.settings import ConfigError, Settings, load_settings
from ragmon.monitor.labeling.sample_store import SampleStore
from ragmon.monitor.storage.store import make_engine, prepare


def settings_of(ctx: click.Context) -> Settings:
    """The settings of this invocation (``--config``, then the environment)."""
    try:
        return load_settings(ctx.obj.get("config"))
    except ConfigError as error:
        raise click.UsageError(str(error)) from None


def store_of(settings: Settings) -> SampleStore:
    """The sample store of the configured database, migrated when it is SQLite."""
    engine = make_engine(settings.database.url)
    prepare(engine)
    return SampleStore(engine)


def label_studio_of(settings: Settings) -> LabelStudio:
    """A client for the configured Label Studio; a usage error names the missing setting."""
    config = settings.label_studio
    if not config.url:
        raise click.UsageError("label_studio.url is not set (RAGMON_LABEL_STUDIO__URL)")
    if config.token is None:
        raise click.UsageError("label_studio.token is not set (RAGMON_LABEL_STUDIO__TOKEN)")
    return LabelStudio(config.url, config.token.get_secret_value(), timeout=config.timeout_seconds)
