"""Readers for the CLI: the store itself, or the running worker's SQL API when the worker
owns the chDB directory. Both answer ``query_table(sql, params)`` / ``query(sql, params)``."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any, Mapping

import orjson

from .store import StoreError, StoreLocked, open_store

__all__ = ["ApiClient", "open_reader"]


class ApiClient:
    """Read-only client of ``/faultline/api/sql`` (see ``sinks/api.py``)."""

    backend = "api"

    def __init__(self, base_url: str, token: str | None = None, *, timeout_s: float = 30.0,
                 max_rows: int = 10_000) -> None:
        self.location = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout_s
        self.max_rows = max_rows

    def _post(self, path: str, payload: Mapping[str, Any]) -> Any:
        req = urllib.request.Request(self.location + path, data=orjson.dumps(payload), method="POST",
                                     headers={"Content-Type": "application/json"})
        if self._token:
            req.add_header("Authorization", _bearer(self._token))
        try:
            with urllib.request.urlopen(req, timeout=self._timeout) as r:
                return orjson.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                reason = orjson.loads(e.read()).get("error", e.reason)
            except Exception:
                reason = e.reason
            raise StoreError(f"worker API {self.location} answered {e.code}: {reason}") from None
        except (urllib.error.URLError, OSError) as e:
            raise StoreError(f"worker API {self.location} unreachable: {getattr(e, 'reason', e)}") from None

    def health(self) -> dict[str, Any]:
        req = urllib.request.Request(self.location + "/faultline/api/health")
        if self._token:
            req.add_header("Authorization", _bearer(self._token))
        try:
            with urllib.request.urlopen(req, timeout=3) as r:
                return orjson.loads(r.read())
        except urllib.error.HTTPError as e:
            raise StoreError(f"worker API {self.location} answered {e.code} to the health check: "
                             "check FAULTLINE_API_TOKEN") from None
        except (urllib.error.URLError, OSError) as e:
            raise StoreError(f"worker API {self.location} unreachable: {getattr(e, 'reason', e)}") from None

    def query_table(self, sql: str, params: Mapping[str, Any] | None = None, *,
                    timeout_s: float | None = None) -> tuple[list[str], list[list[Any]]]:
        out = self._post("/faultline/api/sql", {"sql": sql, "params": dict(params or {}), "max_rows": self.max_rows})
        return out["columns"], out["rows"]

    def query(self, sql: str, params: Mapping[str, Any] | None = None, *,
              timeout_s: float | None = None) -> list[dict[str, Any]]:
        cols, rows = self.query_table(sql, params)
        return [dict(zip(cols, r)) for r in rows]

    def close(self) -> None:
        pass


def _bearer(token: str) -> str:
    """The Authorization value, its bytes UTF-8 on the wire (http.client sends str headers
    as Latin-1; the server compares UTF-8 bytes, so a non-ASCII token must match)."""
    return "Bearer " + token.encode("utf-8").decode("latin-1")


def open_reader(settings: Any, store_path: str | None = None) -> Any:
    """The store (``--store PATH``, the server URL, or ``settings.store_path``); when a worker
    owns the chDB directory, its SQL API on ``settings.web_port`` instead."""
    try:
        return open_store(settings, path=store_path)
    except StoreLocked as locked:
        port = getattr(settings, "web_port", 6066)
        client = ApiClient(f"http://127.0.0.1:{port}", getattr(settings, "api_token", None))
        try:
            client.health()
        except StoreError as e:
            raise StoreError(f"{locked}; and the worker API is not reachable either ({e}): start the "
                             "worker with --web-port, or set FAULTLINE_WEB_PORT to its port") from None
        return client
