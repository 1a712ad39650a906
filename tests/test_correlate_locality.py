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


def test_mount_point_is_the_longest_known_from_inventory_or_samples():
    """Issue 16 item 3 (in part): a file under a mount known only from the node's storage
    signals resolves to that mount, not to the shorter inventory mount around it."""
    view = View(mounts={"n3": [Mount("/", "ext4", None), Mount("/data", "nfs", "nas1")]})
    seen = {"n3": {"/data/shared"}, "n4": {"/scratch"}}
    assert co._mount_point(view, seen, "n3", "/data/shared/run7/ckpt.pt", ["n3"]) == "/data/shared"
    assert co._mount_point(view, seen, "n3", "/data/other/x", ["n3"]) == "/data"
    assert co._mount_point(view, None, "n3", "/data/shared/run7/ckpt.pt", ["n3"]) == "/data"
    # the signal's node knows nothing: the job's other nodes are asked
    assert co._mount_point(view, seen, "n9", "/scratch/a", ["n9", "n4"]) == "/scratch"
    assert co._mount_point(View(), {}, "n9", "/scratch/a", ["n9"]) is None
