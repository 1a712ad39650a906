"""Locality of file systems (issue 16 item 2): a node-local file system's fault explains only
jobs on that node. The rule's classifier alone; the end-to-end story is the external scenario
``local_scratch_full_on_another_node``."""

from __future__ import annotations

from faultline.streams import correlate as co
from faultline.streams.join import Mount, View
from faultline.streams.signals import Signal


def _sig(node: str, path: str, **data) -> Signal:
    return Signal(id=f"{node}-{path}", ts=1, layer="storage", kind="storage_full", subject=f"path:{path}", node=node,
                  severity="error", evidence=["e"], summary="full", data={"path": path, **data})


VIEW = View(mounts={"n3": [Mount("/", "ext4", None), Mount("/scratch", "xfs", None), Mount("/data", "nfs", "nas1")]})


def test_fs_type_the_signal_reports_decides():
    assert co._local_fs(_sig("n9", "/scratch", fs_type="XFS"), View())
    assert not co._local_fs(_sig("n9", "/scratch", fs_type="lustre"), View())


def test_else_the_longest_mount_of_the_nodes_inventory():
    assert co._local_fs(_sig("n3", "/scratch/job7/ckpt"), VIEW)      # /scratch (xfs), not / (ext4)
    assert not co._local_fs(_sig("n3", "/data/imagenet"), VIEW)       # NFS: shared
    assert not co._local_fs(_sig("n4", "/scratch"), VIEW)             # nothing known of n4: not assumed local
