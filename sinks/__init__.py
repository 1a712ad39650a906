"""ClickHouse sinks: schema (``sql/``), store backends (chDB / server), batching writer,
trend queries (``queries/``) and the worker's read-only SQL API."""

from .store import Store, StoreError, StoreLocked, open_store
from .writer import FlushStats, SinkWriter

__all__ = ["Store", "StoreError", "StoreLocked", "open_store", "SinkWriter", "FlushStats"]
