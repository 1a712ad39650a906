"""The check every store-reading command makes before it opens the store: a read never
creates one (``incidents --store /typo`` used to create an empty chDB store there and say
"no incidents")."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..sinks.cli_support import settings_of


def existing_store(args: argparse.Namespace) -> None:
    """Raise CliError unless ``--store PATH`` (or the settings' store_path) is a chDB store
    directory; a ClickHouse server (FAULTLINE_CLICKHOUSE_URL, no --store) is not checked."""
    from ..cli import CliError

    given = getattr(args, "store", None)
    settings = settings_of(args)
    if given is None and settings.clickhouse_url:
        return
    path = Path(given or settings.store_path)
    if not (path / "metadata").is_dir():
        what = "does not exist" if not path.exists() else "is not a faultline store (no chDB metadata/ in it)"
        raise CliError(f"store {path} {what}: give the directory `faultline sink` or `faultline ingest` wrote "
                       f"(--store, or FAULTLINE_STORE_PATH; default var/store, relative to {Path.cwd()})")
