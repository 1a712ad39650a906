#!/bin/bash
# OpenIPMI ipmi_sim BMC on 127.0.0.1:9623 (RMCP/RMCP+), console on 127.0.0.1:9624. Idempotent.
# FRESH=1 (default) wipes persisted SEL/users so every start is identical.
set -euo pipefail
BASE=${BASE:-/tmp/faultline-peers}; D=$BASE/ipmi; PORT=${IPMI_PORT:-9723}; CPORT=${IPMI_CONSOLE_PORT:-9724}
pkgs="openipmi ipmitool"
dpkg -s $pkgs >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null; }
mkdir -p $D
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if alive $D/ipmi_sim.pid; then echo "ipmi_sim already running (pid $(cat $D/ipmi_sim.pid))"; exit 0; fi

cat > $D/lan.conf <<CONF
name "ipmisim1"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 $PORT
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "$D/chassiscontrol 0x20"
  #    num valid name     passw      priv-lim max-sess allowed-auths
  user 1 true  ""       "test"     user     10       none md2 md5 straight
  user 2 true  "admin"  "password" admin    10       none md2 md5 straight
# telnet-style console for emulator commands at runtime (sel_add, sensor_set_value, ...)
console 127.0.0.1 $CPORT
CONF

cat > $D/sim.emu <<'CONF'
mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
# temperature sensor #1 (threshold type), value 0x30 = 48 C, upper thresholds nc/c/nr = 0x70/0x90/0xa0
sensor_add 0x20 0 1 0x01 0x01
sensor_set_value 0x20 0 1 0x30 0
sensor_set_threshold 0x20 0 1 settable 111000 0xa0 0x90 0x70 00 00 00
sensor_set_event_support 0x20 0 1 enable scanning per-state 000111111000000 000111111000000 000111111000000 000111111000000
mc_enable 0x20
CONF

cat > $D/sim.sdrs <<'CONF'
sdr type 18
	device_slave_address	0x20
	device_channel_number	0
	chassis			true
	ipmb_event_gen		false
	ipmb_event_recv		false
	fru_inventory		true
	sel			true
	sdr			true
	sensor			true
	entity_id		system_board
	entity_instance		1
	id_string		"IPMI sim1"
endsdr
sdr type 3
	sensor_owner_id		0x20
	sensor_owner_lun	0
	channel_number		0
	sensor_number		0
	entity_id		system_board
	entity_instance		1
	sensor_type		Watchdog_2
	event_reading_type_code	0x6f
	id_string		"watchdog"
endsdr
sdr type 1
	sensor_owner_id		0x20
	sensor_owner_lun	0
	channel_number		0
	sensor_number		1
	entity_id		system_board
	entity_instance		1
	sensor_type		Temperature
	init_scanning		true
	init_sensor_type	true
	default_sensor_scan_on	true
	event_reading_type_code	1
	analog_data_format	unsigned
	rate_unit		none
	modifier_unit		none
	percentage		false
	base_unit		degrees_C
	modifier_unit_code	unspecified
	linearization		linear
	m			1
	tolerance		0
	b			0
	accuracy		1
	accuracy_exp		0
	sensor_direction	input
	r_exp			0
	b_exp			0
	sensor_maximum		255
	sensor_minimum		0
	id_string		"MBTemp"
endsdr
CONF

cat > $D/chassiscontrol <<CONF
#!/bin/sh
# ipmi_sim chassis_control hook: <dev> get power|boot ... / <dev> set power 0|1 reset 1 boot X ...
ST=$D/power; shift; op=\$1; shift
case \$op in
  get) for p in "\$@"; do case \$p in power) echo "power:\$(cat \$ST 2>/dev/null || echo 1)";; boot) echo "boot:default";; esac; done;;
  set) while [ \$# -gt 1 ]; do [ "\$1" = power ] && echo "\$2" > \$ST; shift 2; done;;
  *) exit 1;;
esac
CONF
chmod +x $D/chassiscontrol

# SDR repository: compiled by sdrcomp into ipmi_sim's persist format at <state>/ipmi_sim/<name>/sdr.20.main
if [ "${FRESH:-1}" = 1 ]; then rm -rf $D/state $D/power; fi
mkdir -p $D/state/ipmi_sim/ipmisim1
sdrcomp $D/sim.sdrs > $D/state/ipmi_sim/ipmisim1/sdr.20.main

t0=$(date +%s.%N)
setsid ipmi_sim -c $D/lan.conf -f $D/sim.emu -s $D/state -n > $D/ipmi_sim.log 2>&1 < /dev/null &
echo $! > $D/ipmi_sim.pid
for i in $(seq 1 100); do
  ipmitool -I lanplus -C 3 -H 127.0.0.1 -p $PORT -U admin -P password -R 1 -N 1 mc info >/dev/null 2>&1 && break
  sleep 0.05
done
ipmitool -I lanplus -C 3 -H 127.0.0.1 -p $PORT -U admin -P password sel time set now >/dev/null
echo "ipmi_sim pid $(cat $D/ipmi_sim.pid) ready after $(echo "$(date +%s.%N) - $t0" | bc) s"
