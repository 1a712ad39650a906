"""snmp collector against a real net-snmp snmpd serving IF-MIB of veth ports in a netns."""

import asyncio
import json
import os
import subprocess
import sys
import time

import orjson
import pytest

from faultline.producers.collectors.snmp import (
    SnmpCollector, SnmpConfigError, Target, load_targets, load_topology, target_from_dict,
)
from faultline.producers.collectors.snmp_traps import decode_link_traps
from faultline.schemas import decode, encode
from peers import snmp_lab  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ports_of(events, device):
    return {e.data.port: e for e in events if e.kind == "net.port" and e.data.device == device}


def links_of(events, port=None):
    return [(e.data.port, e.data.state) for e in events if e.kind == "net.link" and (port is None or e.data.port == port)]


async def wait_for(pred, timeout=8.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return True
        await asyncio.sleep(0.1)
    return pred()


async def test_v2c_v3_and_an_unreachable_switch_in_one_round(snmp_lab, tmp_path, monkeypatch):
    monkeypatch.setenv("FL_TEST_V3_PRIV", snmp_lab.v3_priv)
    (tmp_path / "auth.key").write_text(snmp_lab.v3_auth + "\n")
    cfg = tmp_path / "switches.toml"
    cfg.write_text(f"""
[defaults]
timeout_s = 1.0
retries = 1
port = {snmp_lab.port}

[[switch]]
name = "leaf-dead"
host = "{snmp_lab.host}"
port = 1199

[[switch]]
name = "leaf-v2"
host = "{snmp_lab.host}"
community = "public"

[[switch]]
name = "leaf-v3"
host = "{snmp_lab.host}"
version = "3"
user = "{snmp_lab.v3_user}"
auth_protocol = "sha"
auth_key_file = "{tmp_path / 'auth.key'}"
priv_protocol = "aes"
priv_key_env = "FL_TEST_V3_PRIV"
""")
    topo = tmp_path / "topology.json"
    topo.write_text(json.dumps({"gpu01": [{"nic": "mlx5_0", "switch": "leaf-v2", "port": "swp1", "segment": "leaf"}]}))
    targets = load_targets(cfg)
    assert "flauthpass" not in repr(targets) and "flprivpass" not in repr(targets)  # secrets never in repr/logs
    col = SnmpCollector(targets, topology=load_topology(topo))
    try:
        evs = await col.collect()
    finally:
        await col.close()
    v2, v3 = ports_of(evs, "leaf-v2"), ports_of(evs, "leaf-v3")
    assert {"swp1", "swp2", "mgmt0"} <= set(v2) and "lo" not in v2
    assert set(v3) == set(v2), "the SNMPv3 authPriv user reads the same table"
    assert v2["swp1"].node == "gpu01" and v2["swp2"].node is None and v3["swp1"].node is None
    assert v2["swp1"].data.oper_status == "up" and v2["swp1"].data.speed_mbps == 10000
    assert v2["swp1"].data.in_octets is not None and v2["swp1"].data.in_errors == 0
    assert ports_of(evs, "leaf-dead") == {}
    st = col.state
    assert st["leaf-v2"].status == "ok" and st["leaf-v3"].status == "ok"
    assert st["leaf-dead"].status == "error: timeout"
    # the dead switch is listed first: had the round been serial, the live switches would
    # only have finished after it; they finished while it was still waiting for an answer
    assert st["leaf-v2"].finished < st["leaf-dead"].finished
    assert st["leaf-v3"].finished < st["leaf-dead"].finished
    for e in evs:  # every event is valid contract JSON
        assert decode(encode(e)).kind == e.kind


async def test_link_down_and_up_reach_us_as_traps_and_port_status(snmp_lab):
    target = Target(name="leaf-01", host=snmp_lab.host, port=snmp_lab.port, timeout_s=1, retries=1)
    col = SnmpCollector([target], topology={("leaf-01", "swp1"): "gpu07"})
    live: list = []
    col.on_trap_events = live.extend
    await col.start_traps(snmp_lab.trap_host, snmp_lab.trap_port)
    try:
        first = await col.collect()
        assert ports_of(first, "leaf-01")["swp1"].data.oper_status == "up"
        assert links_of(first) == []

        snmp_lab.link("swp1", "down")
        assert await wait_for(lambda: ("swp1", "down") in links_of(live)), "no linkDown trap within 8 s"
        second = await col.collect()
        assert ports_of(second, "leaf-01")["swp1"].data.oper_status == "down"
        assert links_of(second) == [], "the poll must not repeat an edge the trap already reported"

        snmp_lab.link("swp1", "up")
        assert await wait_for(lambda: ("swp1", "up") in links_of(live)), "no linkUp trap within 8 s"
        third = await col.collect()
        assert ports_of(third, "leaf-01")["swp1"].data.oper_status == "up"
    finally:
        snmp_lab.link("swp1", "up")
        await col.close()
    swp1 = [e for e in live if e.data.port == "swp1"]
    assert [e.data.state for e in swp1] == ["down", "up"]
    assert all(e.node == "gpu07" and e.data.device == "leaf-01" and e.source == "snmp@leaf-01" for e in swp1)
    assert swp1[0].ts <= swp1[1].ts


async def test_flap_between_two_polls_is_seen_through_iflastchange(snmp_lab):
    """No trap listener: a down/up that both happen between two polls must still give both edges."""
    col = SnmpCollector([Target(name="leaf-02", host=snmp_lab.host, port=snmp_lab.port, timeout_s=1)])
    try:
        first = await col.collect()
        t_before = first[0].ts
        snmp_lab.link("swp2", "down", far_end=True)   # the node's NIC loses carrier: oper down, admin up
        await asyncio.sleep(1.6)                       # > snmpd's 1 s monitor sampling, which updates ifLastChange
        snmp_lab.link("swp2", "up", far_end=True)
        await asyncio.sleep(0.3)
        second = await col.collect()
    finally:
        snmp_lab.link("swp2", "up", far_end=True)
        await col.close()
    assert ports_of(second, "leaf-02")["swp2"].data.oper_status == "up"
    edges = [e for e in second if e.kind == "net.link"]
    assert [(e.data.port, e.data.state) for e in edges] == [("swp2", "down"), ("swp2", "up")]
    assert t_before < edges[0].ts < edges[1].ts <= second[0].ts
    assert links_of(second, "swp1") == []


def test_cli_once_prints_contract_lines(snmp_lab):
    p = subprocess.run(
        [sys.executable, "-m", "faultline.cli", "collect", "snmp", "--target", f"leaf-cli={snmp_lab.host}:{snmp_lab.port}",
         "--timeout", "1", "--once", "--output", "-"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "SNMP_COMMUNITY": "public"})
    assert p.returncode == 0, p.stderr
    evs = [decode(line.encode()) for line in p.stdout.splitlines()]
    assert {e.data.port for e in evs if e.kind == "net.port"} >= {"swp1", "swp2"}
    assert all(e.source == "snmp@leaf-cli" for e in evs)


def test_trap_decoder_on_a_v2c_linkdown_datagram():
    from pyasn1.codec.ber import encoder
    from pysnmp.proto import api

    pmod = api.PROTOCOL_MODULES[api.SNMP_VERSION_2C]
    pdu = pmod.SNMPv2TrapPDU()
    pmod.apiTrapPDU.set_defaults(pdu)
    pmod.apiTrapPDU.set_varbinds(pdu, [
        ((1, 3, 6, 1, 2, 1, 1, 3, 0), pmod.TimeTicks(701)),
        ((1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0), pmod.ObjectIdentifier((1, 3, 6, 1, 6, 3, 1, 1, 5, 3))),
        ((1, 3, 6, 1, 2, 1, 2, 2, 1, 1, 12), pmod.Integer(12)),
        ((1, 3, 6, 1, 2, 1, 2, 2, 1, 7, 12), pmod.Integer(1)),
        ((1, 3, 6, 1, 2, 1, 2, 2, 1, 8, 12), pmod.Integer(2)),
    ])
    msg = pmod.Message()
    pmod.apiMessage.set_defaults(msg)
    pmod.apiMessage.set_community(msg, "public")
    pmod.apiMessage.set_pdu(msg, pdu)
    traps = decode_link_traps(encoder.encode(msg), "10.0.0.9", 123)
    assert [(t.agent, t.if_index, t.state, t.oper_status, t.community) for t in traps] == [
        ("10.0.0.9", 12, "down", 2, "public")]


def test_config_errors_name_the_switch_and_key(tmp_path):
    with pytest.raises(SnmpConfigError, match="leaf-x.*auth_key"):
        target_from_dict({"name": "leaf-x", "host": "h", "version": "3", "user": "u", "priv_key": "p"})
    with pytest.raises(SnmpConfigError, match="NOPE_NOT_SET"):
        target_from_dict({"name": "leaf-y", "host": "h", "community_env": "NOPE_NOT_SET"})
    bad = tmp_path / "s.toml"
    bad.write_text("[[switch]]\nname='a'\n")
    with pytest.raises(SnmpConfigError, match="name.*host"):
        load_targets(bad)


def test_topology_from_inventory_events(tmp_path):
    ev = {"v": 1, "id": "t1", "ts": 1, "kind": "inventory.topology", "source": "inv", "node": "gpu03",
          "data": {"links": [{"nic": "mlx5_1", "switch": "leaf-03", "port": "Eth1/7", "segment": "pod1"}]}}
    f = tmp_path / "topo.jsonl"
    f.write_bytes(orjson.dumps(ev) + b"\n")
    assert load_topology(f) == {("leaf-03", "Eth1/7"): "gpu03"}


def test_ber_fast_path_agrees_with_pyasn1():
    """The v1/v2c codec of snmp_ber against pysnmp's own message classes, both directions."""
    from pyasn1.codec.ber import decoder, encoder
    from pysnmp.proto import api

    from faultline.producers.collectors.snmp_ber import END_OF_MIB, GET_BULK, decode_response, encode_request

    pmod = api.PROTOCOL_MODULES[api.SNMP_VERSION_2C]
    req = encode_request(1, b"public", GET_BULK, 123456, [(1, 3, 6, 1, 2, 1, 1, 3), (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6)],
                         non_repeaters=1, max_repetitions=25)
    msg, rest = decoder.decode(req, asn1Spec=pmod.Message())
    pdu = pmod.apiMessage.get_pdu(msg)
    assert rest == b"" and str(pmod.apiMessage.get_community(msg)) == "public"
    assert int(pmod.apiBulkPDU.get_request_id(pdu)) == 123456
    assert int(pmod.apiBulkPDU.get_non_repeaters(pdu)) == 1 and int(pmod.apiBulkPDU.get_max_repetitions(pdu)) == 25
    assert [tuple(o) for o, _ in pmod.apiBulkPDU.get_varbinds(pdu)] == [(1, 3, 6, 1, 2, 1, 1, 3), (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6)]

    resp = pmod.GetResponsePDU()
    pmod.apiPDU.set_defaults(resp)
    pmod.apiPDU.set_request_id(resp, 987654321)
    pmod.apiPDU.set_varbinds(resp, [
        ((1, 3, 6, 1, 2, 1, 1, 3, 0), pmod.TimeTicks(4294967295)),
        ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 300), pmod.Counter64(2 ** 64 - 1)),
        ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1, 300), pmod.OctetString(b"Ethernet1/7")),
        ((1, 3, 6, 1, 2, 1, 2, 2, 1, 8, 300), pmod.Integer(-5)),
        ((1, 3, 6, 1, 4, 1, 99999, 1), pmod.ObjectIdentifier((1, 3, 6, 1, 6, 3, 1, 1, 5, 3))),
        ((1, 3, 6, 1, 2, 1, 99), pmod.EndOfMibView()),
    ])
    m = pmod.Message()
    pmod.apiMessage.set_defaults(m)
    pmod.apiMessage.set_community(m, "public")
    pmod.apiMessage.set_pdu(m, resp)
    rid, err, eidx, vbs = decode_response(encoder.encode(m))
    assert (rid, err, eidx) == (987654321, 0, 0)
    assert [v for _, v in vbs] == [4294967295, 2 ** 64 - 1, b"Ethernet1/7", -5, (1, 3, 6, 1, 6, 3, 1, 1, 5, 3), END_OF_MIB]
    assert vbs[1][0] == (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 300) and vbs[4][0] == (1, 3, 6, 1, 4, 1, 99999, 1)


async def test_topology_from_fl_inventory(snmp_lab, settings, contract_topics):
    """Ports map to nodes from inventory.topology events on Kafka; the latest per node wins."""
    from faultline.producers.publish import Publisher
    from faultline.schemas.events import InventoryTopology, InventoryTopologyData, TopologyLink

    await contract_topics(partitions=2)

    def topo(node, port, i):
        return InventoryTopology(v=1, id=f"topo-{node}-{i}", ts=1795960000000 + i, source="inv", node=node,
                                 data=InventoryTopologyData(links=[TopologyLink(nic="mlx5_0", switch="leaf-k", port=port)]))

    async with Publisher(settings) as pub:
        await pub.send_many([topo("gpu11", "swp2", 1), topo("gpu12", "swp1", 2), topo("gpu11", "mgmt0", 3)])
        await pub.flush()
    col = SnmpCollector([Target(name="leaf-k", host=snmp_lab.host, port=snmp_lab.port, timeout_s=1)],
                        topology_settings=settings)
    try:
        evs = await col.collect()
    finally:
        await col.close()
    ports = ports_of(evs, "leaf-k")
    assert (ports["swp1"].node, ports["swp2"].node, ports["mgmt0"].node) == ("gpu12", None, "gpu11")


def test_counter64_past_the_contracts_int64_stays_a_valid_event():
    """Counter64 runs to 2^64-1, the contract's integers to 2^63-1: the collector keeps the
    value modulo 2^63 (a crossing reads as a counter reset) instead of publishing an event
    the contract refuses (it was dead-lettered whole, losing the port's status too)."""
    from faultline.producers.collectors.snmp import counter_value
    from faultline.schemas.codec import decode, encode
    from faultline.schemas.events import NetPort, NetPortData

    big = 2**64 - 5
    assert counter_value(big) == big - 2**63 and counter_value(2**63 - 1) == 2**63 - 1
    assert counter_value(-1) is None and counter_value("7") is None and counter_value(True) is None
    ev = NetPort(v=1, id="snmp-c64", ts=1_767_000_000_000, source="snmp@leaf01", node=None,
                 data=NetPortData(device="leaf01", port="Eth1/1", oper_status="up", in_octets=counter_value(big)))
    assert decode(encode(ev)).data.in_octets == big - 2**63
