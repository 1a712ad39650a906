"""bmc collector: ipmitool output parsers, Redfish payload parsers, and sensors + SEL from a
real OpenIPMI ``ipmi_sim`` BMC reaching Kafka as hw.sensor / hw.sel."""

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer

from faultline.producers.collectors.base import run_collector
from faultline.producers.collectors.bmc import (
    Bmc, BmcCollector, BmcConfigError, bmc_from_dict, parse_sdr_elist, parse_sel_elist, parse_sensor_list,
    redfish_log_entries, redfish_power, redfish_sensor, redfish_thermal,
)
from faultline.schemas import decode
from peers import ipmi_bmc, redfish_bmc  # noqa: F401

# real ipmitool 1.8.19 output against ipmi_sim (see /work/shared/peers/ipmi_sim.md)
SDR = "MBTemp           | 01h | ucr |  7.1 | 149 degrees C\nwatchdog         | 00h | ok  |  7.1 | 0x00\nFAN1 | 30h | ok | 29.1 | 5400 RPM\nP12V | 31h | lnc | 7.1 | 11.20 Volts\nPSU2 In | 32h | ns | 10.2 | No Reading\n"
SENSOR = "MBTemp           | 48.000     | degrees C  | ok    | na        | na        | na        | 112.000   | 144.000   | 160.000   \nPS1 Status | 0x1        | discrete   | 0x0100| na | na | na | na | na | na\n"
SEL = (
    "   1 | 11/29/26 | 13:56:58 UTC | Temperature MBTemp | Upper Non-critical going high | Asserted | Reading 0 > Threshold 0 degrees C\n"
    "   2 | 11/29/26 | 13:56:58 UTC | Memory #0x05 | Uncorrectable ECC | Asserted\n"
    "   a | 11/29/26 | 13:57:00 UTC | Power Supply PSU2 | Failure detected | Asserted\n"
    "   b | 11/29/26 | 13:58:00 UTC | Power Supply PSU2 | Failure detected | Deasserted\n"
    "   c | Pre-Init |  0000000012 | System Event #0x01 | Timestamp Clock Sync | Asserted\n")


def test_sdr_elist():
    got = {d.sensor: (d.type, d.value, d.unit, d.status) for d in parse_sdr_elist(SDR)}
    assert got == {"MBTemp": ("temperature", 149.0, "degrees C", "critical"), "FAN1": ("fan", 5400.0, "RPM", "ok"),
                   "P12V": ("voltage", 11.2, "Volts", "warning")}


def test_sensor_list():
    (d,) = parse_sensor_list(SENSOR)
    assert (d.sensor, d.value, d.status, d.type) == ("MBTemp", 48.0, "ok", "temperature")


def test_sel_elist():
    es = parse_sel_elist(SEL)
    assert [e.record for e in es] == [1, 2, 10, 11, 12]
    assert [(e.data.sensor_type, e.data.severity) for e in es] == [
        ("Temperature", "warning"), ("Memory", "critical"), ("Power Supply", "critical"), ("Power Supply", "ok"),
        ("System Event", "ok")]
    assert es[0].ts == 1795960618000 and es[4].ts is None
    assert "Uncorrectable ECC" in es[1].data.message and es[1].data.entry_id == "2"


def test_redfish_payloads():
    # shapes of the DMTF Redfish schemas (Thermal v1, Power v1, Sensor v1, LogEntry v1)
    th = redfish_thermal({"Temperatures": [{"Name": "CPU1 Temp", "ReadingCelsius": 91, "Status": {"Health": "Warning", "State": "Enabled"}},
                                            {"Name": "Absent", "ReadingCelsius": None}],
                          "Fans": [{"Name": "Fan 1", "Reading": 30, "ReadingUnits": "Percent", "Status": {"Health": "OK"}}]})
    assert [(d.sensor, d.type, d.value, d.status, d.unit) for d in th] == [
        ("CPU1 Temp", "temperature", 91.0, "warning", "degrees C"), ("Fan 1", "fan", 30.0, "ok", "percent")]
    pw = redfish_power({"PowerControl": [{"Name": "System Power Control", "PowerConsumedWatts": 2890}],
                        "Voltages": [{"Name": "VRM1", "ReadingVolts": 1.2, "Status": {"Health": "OK"}}],
                        "PowerSupplies": [{"Name": "PSU2", "LastPowerOutputWatts": None, "Status": {"Health": "Critical", "State": "Enabled"}}]})
    assert [(d.sensor, d.type, d.status) for d in pw] == [
        ("System Power Control", "power", "ok"), ("VRM1", "voltage", "ok"), ("PSU2", "power", "critical")]
    s = redfish_sensor({"Id": "PS1Current", "Name": "PSU1 current", "ReadingType": "Current", "Reading": 7.5,
                        "ReadingUnits": "A", "Status": {"Health": "OK"}})
    assert (s.type, s.value, s.unit) == ("current", 7.5, "A")
    es = redfish_log_entries({"Members": [
        {"Id": "2", "Created": "2026-11-29T14:00:05Z", "Severity": "Critical", "Message": "PSU2 AC lost",
         "MessageId": "PowerEvent.1.0.PowerSupplyFailed", "SensorType": "Power Supply"},
        {"Id": "1", "Created": "2026-11-29T14:00:00+00:00", "Severity": "OK", "Message": "Log cleared", "EntryType": "SEL"}]})
    assert [(e.record, e.data.severity, e.data.sensor_type, e.data.message_id) for e in es] == [
        (1, "ok", "SEL", None), (2, "critical", "Power Supply", "PowerEvent.1.0.PowerSupplyFailed")]


def test_credentials_from_env_or_file_never_in_repr(tmp_path, monkeypatch):
    monkeypatch.setenv("FL_BMC_USER", "root")
    (tmp_path / "pw").write_text("s3cret-pw\n")
    b = bmc_from_dict({"node": "gpu01", "host": "10.0.0.1", "user_env": "FL_BMC_USER", "password_file": str(tmp_path / "pw")})
    assert (b.user, b.password) == ("root", "s3cret-pw") and "s3cret" not in repr(b)
    with pytest.raises(BmcConfigError, match="gpu02.*password"):
        bmc_from_dict({"node": "gpu02", "host": "h", "user": "u"})


async def test_sel_cursor_cleared_sel_and_restart(tmp_path):
    b = Bmc(node="n1", host="h", user="u", password="p")
    col = BmcCollector([b], state_file=tmp_path / "bmc.json", sel_history_hours=1e9)
    st = col.state[col._key(b)]
    first = col._new_sel(b, st, parse_sel_elist(SEL), 1795970000000, "ipmi@h")
    assert len(first) == 5
    assert col._new_sel(b, st, parse_sel_elist(SEL), 1795970000000, "ipmi@h") == []  # nothing new
    more = SEL + "   d | 11/29/26 | 14:00:00 UTC | Processor CPU1 | IERR | Asserted\n"
    (new,) = col._new_sel(b, st, parse_sel_elist(more), 1795970000000, "ipmi@h")
    assert (new.data.entry_id, new.data.severity) == ("d", "critical")
    col._save()
    col2 = BmcCollector([b], state_file=tmp_path / "bmc.json")  # restart: remembers entry d
    assert col2._new_sel(b, col2.state[col2._key(b)], parse_sel_elist(more), 1795970000000, "ipmi@h") == []
    cleared = "   1 | 11/29/26 | 15:00:00 UTC | Event Logging Disabled #0x07 | Log area reset/cleared | Asserted\n"
    (c,) = col2._new_sel(b, col2.state[col2._key(b)], parse_sel_elist(cleared), 1795970000000, "ipmi@h")
    assert c.data.severity == "ok" and "cleared" in c.data.message


async def _read_topic(settings, topic, want, timeout=20.0):
    c = AIOKafkaConsumer(settings.topic(topic), bootstrap_servers=settings.kafka_bootstrap,
                         auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    out = []
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end and not want(out):
            batch = await c.getmany(timeout_ms=500)
            for msgs in batch.values():
                out += [(m.key, decode(m.value)) for m in msgs]
    finally:
        await c.stop()
    return out


async def test_ipmi_sim_sensors_and_new_sel_entry_reach_kafka(ipmi_bmc, settings, contract_topics):
    await contract_topics(partitions=1)
    bmc = Bmc(node="gpu01", host=ipmi_bmc.host, port=ipmi_bmc.port, user=ipmi_bmc.user,
              password=ipmi_bmc.password, timeout_s=10)
    dead = Bmc(node="gpu02", host="127.0.0.1", port=9, user="admin", password="password", timeout_s=3)
    col = BmcCollector([bmc, dead])
    n1 = await run_collector(col, settings, once=True)
    # the test changes the BMC: temperature to 165 C (threshold events) and an uncorrectable ECC record
    ipmi_bmc.console("sensor_set_value 0x20 0 1 0xa5 1")
    ipmi_bmc.ipmitool("raw", "0x0a", "0x44", "0x00", "0x00", "0x02", "0x00", "0x00", "0x00", "0x00",
                      "0x20", "0x00", "0x04", "0x0c", "0x05", "0x6f", "0x01", "0xff", "0xff")
    n2 = await run_collector(col, settings, once=True)
    assert n1 >= 1 and n2 >= 2
    assert col.state[col._key(dead)].status.startswith("error"), "an unreachable BMC is reported, not fatal"

    def enough(out):
        return any(e.kind == "hw.sel" and e.data.sensor_type == "Memory" for _, e in out)

    got = await _read_topic(settings, "fl.hw", enough)
    temps = [e.data.value for _, e in got if e.kind == "hw.sensor" and e.data.sensor == "MBTemp"]
    assert temps[0] == 48.0 and temps[-1] == 165.0
    crit = [e for _, e in got if e.kind == "hw.sensor" and e.data.value == 165.0]
    assert crit[0].data.status == "critical" and crit[0].data.type == "temperature"
    sels = [e for _, e in got if e.kind == "hw.sel"]
    mem = [e for e in sels if e.data.sensor_type == "Memory"]
    assert len(mem) == 1 and mem[0].data.severity == "critical" and "Uncorrectable ECC" in mem[0].data.message
    assert any(e.data.sensor_type == "Temperature" and e.data.severity == "critical" for e in sels)
    assert len({e.data.entry_id for e in sels}) == len(sels), "each SEL entry is published once"
    assert all(k == b"gpu01" and e.node == "gpu01" for k, e in got)


def _mockup(bmc, entries):
    bmc.put("Chassis", {"Members": [{"@odata.id": "/redfish/v1/Chassis/1U"}]})
    bmc.put("Chassis/1U", {"@odata.id": "/redfish/v1/Chassis/1U", "Id": "1U",
                           "Thermal": {"@odata.id": "/redfish/v1/Chassis/1U/Thermal"},
                           "Power": {"@odata.id": "/redfish/v1/Chassis/1U/Power"}})
    bmc.put("Chassis/1U/Thermal", {"Temperatures": [
        {"MemberId": "0", "Name": "CPU1 Temp", "ReadingCelsius": 41, "Status": {"State": "Enabled", "Health": "OK"}}],
        "Fans": [{"MemberId": "0", "Name": "BaseBoard System Fan", "Reading": 2100, "ReadingUnits": "RPM",
                  "Status": {"State": "Enabled", "Health": "OK"}}]})
    bmc.put("Chassis/1U/Power", {"PowerControl": [{"Name": "System Power Control", "PowerConsumedWatts": 344}],
                                 "PowerSupplies": [{"Name": "Power Supply Bay 2", "LastPowerOutputWatts": 0,
                                                    "Status": {"State": "Enabled", "Health": "Critical"}}]})
    bmc.put("Systems", {"Members": [{"@odata.id": "/redfish/v1/Systems/437XR1138R2"}]})
    bmc.put("Systems/437XR1138R2", {"Id": "437XR1138R2",
                                    "LogServices": {"@odata.id": "/redfish/v1/Systems/437XR1138R2/LogServices"}})
    bmc.put("Systems/437XR1138R2/LogServices", {"Members": [{"@odata.id": "/redfish/v1/Systems/437XR1138R2/LogServices/SEL"}]})
    bmc.put("Systems/437XR1138R2/LogServices/SEL", {"Id": "SEL", "Name": "System Event Log Service",
                                                    "Entries": {"@odata.id": "/redfish/v1/Systems/437XR1138R2/LogServices/SEL/Entries"}})
    bmc.put("Systems/437XR1138R2/LogServices/SEL/Entries", {"Members": entries})


async def test_redfish_service_sensors_and_new_log_entry(redfish_bmc):
    """Against sushy-tools' sushy-static serving a Redfish tree (DMTF mockup shapes) over HTTP."""
    e1 = {"@odata.id": "/redfish/v1/Systems/437XR1138R2/LogServices/SEL/Entries/1", "Id": "1",
          "Created": "2026-11-29T14:00:00Z", "EntryType": "SEL", "Severity": "OK", "Message": "System power on",
          "MessageId": "Event.1.0.PowerOn", "SensorType": "Power Unit"}
    _mockup(redfish_bmc, [e1])
    b = Bmc(node="gpu05", host=redfish_bmc.url, protocol="redfish", user="root", password="calvin",
            auth="basic", timeout_s=5)
    col = BmcCollector([b], sel_history_hours=1e6)
    try:
        r1 = await col.collect()
        e2 = {**e1, "@odata.id": e1["@odata.id"][:-1] + "2", "Id": "2", "Created": "2026-11-29T14:05:00Z",
              "Severity": "Critical", "Message": "Power supply 2 input lost", "MessageId": "PowerEvent.1.0.PSUInputLost",
              "SensorType": "Power Supply"}
        _mockup(redfish_bmc, [e1, e2])
        r2 = await col.collect()
    finally:
        await col.close()
    assert col.state[col._key(b)].status == "ok"
    sensors = {e.data.sensor: e.data for e in r1 if e.kind == "hw.sensor"}
    assert sensors["CPU1 Temp"].value == 41.0 and sensors["BaseBoard System Fan"].unit == "RPM"
    assert sensors["Power Supply Bay 2"].status == "critical" and sensors["System Power Control"].value == 344.0
    assert [e.data.entry_id for e in r1 if e.kind == "hw.sel"] == ["1"]
    (new,) = [e for e in r2 if e.kind == "hw.sel"]
    assert (new.data.entry_id, new.data.severity, new.data.sensor_type, new.data.message_id, new.node) == \
        ("2", "critical", "Power Supply", "PowerEvent.1.0.PSUInputLost", "gpu05")
    assert new.ts == 1795961100000 and new.source.startswith("redfish@")
