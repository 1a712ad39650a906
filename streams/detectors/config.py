"""Detector thresholds (one frozen struct; every default is a documented judgement call)."""

from __future__ import annotations

from msgspec import Struct


class DetectorConfig(Struct, frozen=True, kw_only=True):
    # gpu
    sbe_burst: int = 100               # corrected ECC errors in one sample interval
    nvlink_burst: int = 5              # NVLink CRC/replay/recovery errors in one interval
    pcie_burst: int = 20               # PCIe replays in one interval
    throttle_min_ms: int = 20_000      # thermal/power-brake throttling this long = episode
    util_busy_pct: float = 50.0        # a GPU "working" above this (EWMA)
    util_idle_pct: float = 10.0        # ... and "collapsed" below this
    util_collapse_samples: int = 3
    mem_high_ratio: float = 0.97
    gpu_lost_factor: float = 4.0       # a GPU silent this many x its own sample interval ...
    gpu_lost_min_ms: int = 60_000      # ... and at least this long, while its node's other GPUs report
    # network
    flap_window_ms: int = 600_000
    flap_count: int = 3                # down transitions in the window = flap
    port_err_burst: int = 10           # in+out errors in one interval
    port_discard_burst: int = 1_000    # in+out discards in one interval
    rdma_err_burst: int = 10           # symbol/rcv errors per interval
    rdma_surge_factor: float = 5.0     # rate vs the port's own EWMA baseline
    rdma_retrans_min_rate: float = 10.0  # /s, absolute floor for a retransmit/timeout surge
    rdma_cnp_min_rate: float = 1_000.0   # /s, absolute floor for a CNP/ECN storm
    # storage
    storage_warmup: int = 5            # samples before the baseline is trusted
    storage_alpha: float = 0.1         # EWMA weight
    storage_lat_factor: float = 6.0
    storage_lat_min_ms: float = 25.0   # absolute latency floor of an anomaly
    storage_tput_drop: float = 0.1     # throughput below this share of baseline ...
    storage_anomaly_samples: int = 2   # ... for this many consecutive samples
    storage_learn_below: float = 2.0   # the baseline learns only samples below this x baseline
    storage_ref_factor: float = 10.0   # latency vs the long-memory reference (slow degradation)
    storage_ref_alpha_up: float = 0.001
    storage_full_pct: float = 98.0
    # jobs
    stall_floor_ms: int = 600_000
    stall_factor: float = 10.0         # x the job's own p90 progress interval
    straggler_factor: float = 1.5      # step time vs the median of the other ranks
    straggler_samples: int = 3
    slowdown_factor: float = 1.3       # job step time vs its own first samples
    ckpt_stale_factor: float = 3.0     # no succeeded checkpoint for 3x the usual interval
