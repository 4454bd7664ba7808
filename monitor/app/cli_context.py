"""What the CLI's command groups share: the settings of the invocation, and the stores and clients
built from them, each failing as a usage error that names the setting."""

from __future__ import annotations

from pathlib import Path

import click
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

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
    """The sample store of the configured database (see :func:`existing_engine_of`: a database
    that does not exist is not created)."""
    return SampleStore(existing_engine_of(settings))


def existing_engine_of(settings: Settings) -> Engine:
    """The configured database for a command that only reads: a SQLite file that does not exist
    is a usage error naming it (reading in the wrong directory must not create an empty database
    and report nothing); an existing one is migrated in place, as ``serve`` would."""
    url = make_url(settings.database.url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") and not Path(
            url.database).exists():
        raise click.UsageError(f"no ragmon database at {url.database} (database.url): run this where `ragmon serve` "
                               "runs, or point --config or RAGMON_DATABASE__URL at its database")
    engine = make_engine(settings.database.url)
    prepare(engine)
    return engine


def label_studio_of(settings: Settings) -> LabelStudio:
    """A client for the configured Label Studio; a usage error names the missing setting."""
    config = settings.label_studio
    if not config.url:
        raise click.UsageError("label_studio.url is not set (RAGMON_LABEL_STUDIO__URL)")
    if config.token is None:
        raise click.UsageError("label_studio.token is not set (RAGMON_LABEL_STUDIO__TOKEN)")
    return LabelStudio(config.url, config.token.get_secret_value(), timeout=config.timeout_seconds)
