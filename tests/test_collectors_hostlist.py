"""Slurm hostlist expansion (``producers/collectors/hostlist.py``)."""

import pytest
from hypothesis import given, strategies as st

from faultline.producers.collectors.hostlist import HostlistError, compress, expand


@pytest.mark.parametrize("expr, hosts", [
    ("gpu[01-04,07]", ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]),
    ("n1", ["n1"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("a,b[1-2],c", ["a", "b1", "b2", "c"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("rack[1-2]-gpu[01-02].ib", ["rack1-gpu01.ib", "rack1-gpu02.ib", "rack2-gpu01.ib", "rack2-gpu02.ib"]),
    ("n[1,1-2]", ["n1", "n2"]),
    ("", []), (None, []), ("(null)", []), ("None assigned", []),
    (" gpu[1-2] , cpu3 ", ["gpu1", "gpu2", "cpu3"]),
])
def test_expand(expr, hosts):
    assert expand(expr) == hosts


@pytest.mark.parametrize("bad", ["n[1-", "n1]", "n[a-b]", "n[3-1]", "n[1,,2]", "n[[1]]", "n[1-2-3]"])
def test_malformed_is_a_clear_error(bad):
    with pytest.raises(HostlistError) as e:
        expand(bad)
    assert bad in str(e.value)


def test_huge_range_refused():
    with pytest.raises(HostlistError):
        expand("n[1-99999999]")


def test_compress_examples():
    assert compress(["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]) == "gpu[01-04,07]"
    assert compress(["n1"]) == "n1"
    assert compress(["n9", "n10", "n11"]) == "n[9-11]"


names = st.lists(
    st.tuples(st.sampled_from(["gpu", "n", "rack1-c", "x"]), st.integers(0, 300), st.booleans()),
    min_size=1, max_size=40,
).map(lambda xs: [f"{p}{str(i).zfill(3) if pad else i}" for p, i, pad in xs])


@given(names)
def test_compress_then_expand_roundtrips(hosts):
    assert sorted(expand(compress(hosts))) == sorted(set(hosts))
