"""Changes are context (issue 16 item 1, in part): the failure signatures a version change does not
produce. End to end: external scenario ``image_rollout_then_time_limit_and_assertion``."""

from __future__ import annotations

from faultline.streams import correlate as co
from faultline.streams.signatures import classify

# verbatim shapes: ATen's kernel-side check of a label (PyTorch 2.x) and PyTorch's report of it
KERNEL_ASSERT = ("/opt/conda/conda-bld/pytorch_1708025847130/work/aten/src/ATen/native/cuda/Loss.cu:250: "
                 "nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion "
                 "`t >= 0 && t < n_classes` failed.")
REPORT = "RuntimeError: CUDA error: device-side assert triggered"


def test_a_kernel_assertion_is_the_users_bug():
    for line in (KERNEL_ASSERT, REPORT):
        sig = classify(line)
        assert sig is not None and sig.name == "cuda_device_assert", (line, sig)
        assert sig.name in co.USER_BUG_SIGS and sig.name in co.APP_ERROR_SIGS
    # other CUDA errors stay what they were: reports of the environment failing
    assert classify("RuntimeError: CUDA error: unspecified launch failure").name == "cuda_error"

