"""The simulated cluster: nodes x GPUs, NICs on rail-optimised leaf switches, spines,
storage mounts and the per-node software stack.

Layout (the common rail-optimised design of H100 SuperPODs): nodes are grouped in
scalable units (SU, ``su_size`` nodes); inside an SU, NIC ``k`` of every node plugs into
leaf ``leafNN-r<k>`` (one leaf per rail) on port ``Eth1/<slot>``; every leaf has uplinks to
the spines. A leaf is the network *segment* (``inventory.topology`` ``segment``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# PCI bus ids of the 8 GPUs and 8 ConnectX-7 NICs of an HGX H100 8-GPU baseboard
# (DGX H100 layout; `nvidia-smi -q` / `lspci` order).
_GPU_PCI = ["0000:1b:00", "0000:43:00", "0000:52:00", "0000:61:00",
            "0000:9d:00", "0000:c3:00", "0000:d1:00", "0000:df:00"]
_NIC_PCI = ["0000:1a:00.0", "0000:40:00.0", "0000:4f:00.0", "0000:5e:00.0",
            "0000:9a:00.0", "0000:c0:00.0", "0000:ce:00.0", "0000:dc:00.0"]

BASE_VERSIONS: dict[str, str] = {
    "driver": "550.90.07",
    "cuda": "12.4",
    "nccl": "2.21.5",
    "gpu_firmware": "96.00.89.00.01",
    "bmc_firmware": "24.06.14",
    "bios": "1.6.7",
    "kernel": "5.15.0-119-generic",
    "os": "Ubuntu 22.04.4 LTS",
    "image": "dgx-baseos-6.2.1",
    "framework": "torch 2.4.0+cu124",
    "container_runtime": "enroot 3.5.0",
    "ofed": "MLNX_OFED_LINUX-24.04-0.7.0.0",
}
#: older versions a few nodes still run (benign drift) -> decoys for version findings
OLD_VERSIONS: dict[str, str] = {
    "bios": "1.5.2",
    "bmc_firmware": "23.11.02",
    "kernel": "5.15.0-117-generic",
    "gpu_firmware": "96.00.74.00.11",
}

GPU_MEM_MIB = 81559  # H100 80GB HBM3 as NVML reports it


@dataclass(slots=True)
class Mount:
    path: str
    fs_type: str
    backend: str
    server: str | None
    base_used_pct: float
    read_lat_ms: float
    write_lat_ms: float


@dataclass(slots=True)
class Link:
    nic: str          # mlx5_k
    netdev: str       # enp26s0np0
    pci: str
    switch: str       # leaf name
    port: str         # Eth1/<n>
    segment: str
    ip: str


@dataclass(slots=True)
class Node:
    idx: int
    name: str
    su: int
    gpu_pci: list[str]
    gpu_uuid: list[str]
    links: list[Link]
    versions: dict[str, str]
    mounts: list[Mount]
    bmc: str
    serial: str = ""


@dataclass(slots=True)
class SwitchPort:
    """A switch port the SNMP poller reads: node-facing (``node`` set) or an uplink."""

    switch: str
    port: str
    node: int | None          # node index it faces, None for uplinks
    segment: str
    speed_mbps: int = 400_000


@dataclass
class Cluster:
    nodes: list[Node]
    ports: list[SwitchPort]
    leaves: list[str]
    spines: list[str]
    mounts: list[Mount]
    gpus_per_node: int
    nics_per_node: int
    port_index: dict[tuple[str, str], int] = field(default_factory=dict)

    def node_by_name(self, name: str) -> Node:
        return self.nodes[self._names[name]]

    def __post_init__(self) -> None:
        self._names = {n.name: n.idx for n in self.nodes}
        self.port_index = {(p.switch, p.port): i for i, p in enumerate(self.ports)}


def node_name(i: int, n_nodes: int) -> str:
    width = max(3, len(str(n_nodes)))
    return f"gpu-{i + 1:0{width}d}"


def _hex_uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def build_cluster(rng: random.Random, n_nodes: int, gpus_per_node: int = 8, *,
                  nics_per_node: int | None = None, su_size: int = 32,
                  drift_frac: float = 0.08) -> Cluster:
    """Build a deterministic cluster from ``rng``."""
    nics = nics_per_node or min(gpus_per_node, 8)
    n_su = (n_nodes + su_size - 1) // su_size
    n_spines = max(2, min(16, n_su * 2))
    spines = [f"spine-{i + 1:02d}" for i in range(n_spines)]
    mounts = [
        Mount("/datasets", "lustre", "lustre:datafs", "10.40.0.11@o2ib", 71.0, 1.6, 3.5),
        Mount("/ckpt", "nfs4", "nfs:vast-ckpt", "vast-ckpt-01", 58.0, 2.2, 4.5),
        Mount("/scratch", "xfs", "local-nvme", None, 22.0, 0.15, 0.3),
    ]
    nodes: list[Node] = []
    leaves: list[str] = []
    ports: list[SwitchPort] = []
    for su in range(n_su):
        for r in range(nics):
            leaves.append(f"leaf{su + 1:02d}-r{r}")
    for i in range(n_nodes):
        su, slot = divmod(i, su_size)
        gpu_pci = [_GPU_PCI[g] if g < len(_GPU_PCI) else f"0000:{0xe0 + g:02x}:00" for g in range(gpus_per_node)]
        links = []
        for k in range(nics):
            pci = _NIC_PCI[k] if k < len(_NIC_PCI) else f"0000:{0xe8 + k:02x}:00.0"
            bus = int(pci[5:7], 16)
            leaf = f"leaf{su + 1:02d}-r{k}"
            links.append(Link(f"mlx5_{k}", f"enp{bus}s0np0", pci, leaf, f"Eth1/{slot + 1}", leaf,
                              f"10.{100 + su}.{k}.{slot + 10}"))
        versions = dict(BASE_VERSIONS)
        if rng.random() < drift_frac:
            comp = rng.choice(sorted(OLD_VERSIONS))
            versions[comp] = OLD_VERSIONS[comp]
        name = node_name(i, n_nodes)
        nodes.append(Node(i, name, su, gpu_pci, [f"GPU-{_hex_uuid(rng)}" for _ in range(gpus_per_node)],
                          links, versions, mounts, f"{name}-bmc", f"1{rng.randrange(10**11, 10**12)}"))
    for leaf_i, leaf in enumerate(leaves):
        su = leaf_i // nics
        for slot in range(su_size):
            i = su * su_size + slot
            if i < n_nodes:
                ports.append(SwitchPort(leaf, f"Eth1/{slot + 1}", i, leaf))
        for u in range(min(4, n_spines)):
            ports.append(SwitchPort(leaf, f"Eth1/{su_size + 1 + u}", None, leaf))
    return Cluster(nodes, ports, leaves, spines, mounts, gpus_per_node, nics)


def topology_data(node: Node) -> dict:
    return {
        "links": [{"nic": l.nic, "switch": l.switch, "port": l.port, "segment": l.segment} for l in node.links],
        "storage": [{"path": m.path, "backend": m.backend, "server": m.server} for m in node.mounts],
    }
