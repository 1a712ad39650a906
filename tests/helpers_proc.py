"""Stopping a test's child process: the one helper (``from helpers_proc import stop_process``;
``tests/`` is on ``sys.path`` as for ``conftest``). It lives in ``faultline.streams.faust_harness``
(the demo's and the benches' worker processes stop the same way) and is re-exported here."""

from faultline.streams.faust_harness import stop_process

__all__ = ["stop_process"]
