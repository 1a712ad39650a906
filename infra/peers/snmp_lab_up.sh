#!/bin/bash
# A "switch" for the snmp collector: net-snmp snmpd inside network namespace $LAB, serving IF-MIB for
# switch ports swp1..swpN that are veth pairs to "node NICs" nic1..nicN in namespace $LAB-p.
# Adapted from /work/shared/peers/scripts/snmp_lab_up.sh (see /work/shared/peers/snmpd.md for the gotchas).
#
# The collector runs in the host namespace: a management veth connects host ${LAB}h (169.254.$OCT.1/30)
# with mgmt0 in $LAB (169.254.$OCT.2/30); snmpd listens on 169.254.$OCT.2:$SNMP_PORT (and the namespace's
# own 127.0.0.1:$SNMP_PORT) and sends linkUp/linkDown v2c traps to 169.254.$OCT.1:$TRAP_PORT.
# Env: LAB (netns name, <=12 chars, default fllab) OCT (default 88) SNMP_PORT (1161) TRAP_PORT (1162)
#      PORTS (switch ports, default 2) EXTRA (extra veth pairs inside $LAB, 2 ifaces each, for the bench)
#      V3_USER V3_AUTH V3_PRIV (an SNMPv3 authPriv user, SHA/AES; default fluser/flauthpass1/flprivpass1)
#      BASE (state dir root, default /tmp/faultline-peers)
# Idempotent; prints "ready" and the ifIndex of each swp port. Stop with snmp_lab_down.sh (same env).
set -euo pipefail
LAB=${LAB:-fllab}; PEER=${LAB}-p; OCT=${OCT:-88}; SNMP_PORT=${SNMP_PORT:-1161}; TRAP_PORT=${TRAP_PORT:-1162}
PORTS=${PORTS:-2}; EXTRA=${EXTRA:-0}
V3_USER=${V3_USER:-fluser}; V3_AUTH=${V3_AUTH:-flauthpass1}; V3_PRIV=${V3_PRIV:-flprivpass1}
BASE=${BASE:-/tmp/faultline-peers}; D=$BASE/snmp-$LAB
pkgs="snmpd snmp iproute2"
dpkg -s $pkgs >/dev/null 2>&1 || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null; }
mkdir -p $D/persist
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
H=${LAB}h

ip netns list | grep -qw "$LAB"  || ip netns add "$LAB"
ip netns list | grep -qw "$PEER" || ip netns add "$PEER"
ip -n "$LAB" link set lo up; ip -n "$PEER" link set lo up
# management link host <-> switch namespace
if ! ip link show "$H" >/dev/null 2>&1; then
  ip link add "$H" type veth peer name mgmt0
  ip link set mgmt0 netns "$LAB"
  ip addr add 169.254.$OCT.1/30 dev "$H"
  ip -n "$LAB" addr add 169.254.$OCT.2/30 dev mgmt0
fi
ip link set "$H" up; ip -n "$LAB" link set mgmt0 up
# switch ports swpN <-> node NICs nicN
for i in $(seq 1 "$PORTS"); do
  if ! ip -n "$LAB" link show swp$i >/dev/null 2>&1; then
    ip link add swp$i netns "$LAB" type veth peer name nic$i netns "$PEER"
  fi
  ip -n "$LAB" link set swp$i up; ip -n "$PEER" link set nic$i up
done
# bench: many more ports, both ends inside the switch namespace
for i in $(seq 1 "$EXTRA"); do
  ip -n "$LAB" link show x$i >/dev/null 2>&1 || ip -n "$LAB" link add x$i type veth peer name y$i
  ip -n "$LAB" link set x$i up; ip -n "$LAB" link set y$i up
done

cat > $D/snmpd.conf <<CONF
agentAddress udp:169.254.$OCT.2:$SNMP_PORT,udp:127.0.0.1:$SNMP_PORT
rocommunity public 169.254.$OCT.0/30
rocommunity public 127.0.0.1
# rw only from the namespace's loopback, to switch the ifTable cache off after start
rwcommunity private 127.0.0.1
sysName $LAB
sysLocation faultline-lab
dontLogTCPWrappersConnects yes
# SNMPv3 authPriv user for the collector
createUser $V3_USER SHA "$V3_AUTH" AES "$V3_PRIV"
rouser $V3_USER priv
# internal user for the DisMan event monitor (link traps)
createUser internalUser SHA "internalpass123"
rouser internalUser
iquerySecName internalUser
trap2sink 169.254.$OCT.1:$TRAP_PORT public
# linkUp/linkDown by numeric OID (Debian ships no IF-MIB text), sampled every second, none at start
monitor -r 1 -S -e _linkUp   linkUpMon   .1.3.6.1.2.1.2.2.1.8 != 2
monitor -r 1 -S -e _linkDown linkDownMon .1.3.6.1.2.1.2.2.1.8 == 2
CONF

export MIBS= SNMP_PERSISTENT_DIR=$D/persist
if ! alive $D/snmpd.pid; then
  rm -rf $D/persist/*   # createUser lines are applied once per persistent store
  ip netns exec "$LAB" snmpd -C -I -smux -c $D/snmpd.conf -p $D/snmpd.pid -Lf $D/snmpd.log
fi
for i in $(seq 1 100); do
  ip netns exec "$LAB" snmpget -v2c -c public -t 0.2 -r 0 127.0.0.1:$SNMP_PORT .1.3.6.1.2.1.1.5.0 >/dev/null 2>&1 && break
  sleep 0.05
done
# ifTable/ifXTable cache off: every request reads the kernel (NET-SNMP-AGENT-MIB::nsCacheTimeout.<table> = 0)
# (IFCACHE=keep leaves net-snmp's 3 s cache on, as a production agent would run)
[ "${IFCACHE:-off}" = keep ] || for t in .1.3.6.1.2.1.2.2 .1.3.6.1.2.1.31.1.1; do
  ip netns exec "$LAB" snmpset -v2c -c private -Oq 127.0.0.1:$SNMP_PORT .1.3.6.1.4.1.8072.1.5.3.1.2$t i 0 >/dev/null 2>&1 || true
done
echo "ready $LAB 169.254.$OCT.2:$SNMP_PORT pid $(cat $D/snmpd.pid)"
for i in $(seq 1 "$PORTS"); do echo "swp$i $(ip -n "$LAB" -o link show swp$i | cut -d: -f1)"; done
