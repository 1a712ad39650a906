"""Alert delivery: fl.alerts + fl.incidents -> Prometheus Alertmanager (v2 API) and a
generic JSON / Slack-compatible webhook (``faultline notify``; docs/alerts.md).

- ``mapping``: the pure part - records -> Alertmanager alerts, labels, inhibition links,
  resolution (``AlertBook``)
- ``payloads``: request bodies (pure)
- ``transport``: the one HTTP boundary (aiohttp), its exception tree, retry with backoff
- ``config``: ``NotifySettings`` (FAULTLINE_NOTIFY_* / ``[faultline.notify]``)
- ``service``: the consumer group ``<app id>-notify`` that delivers and then commits
"""
