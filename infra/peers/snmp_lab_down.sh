#!/bin/bash
# Stop the snmpd of snmp_lab_up.sh (by PID file) and delete its namespaces (which destroys their veths,
# and with mgmt0 the host end ${LAB}h). Same env as the up script.
LAB=${LAB:-fllab}; BASE=${BASE:-/tmp/faultline-peers}; D=$BASE/snmp-$LAB
if [ -s $D/snmpd.pid ]; then
  pid=$(cat $D/snmpd.pid)
  if kill "$pid" 2>/dev/null; then
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f $D/snmpd.pid
fi
ip netns del "$LAB" 2>/dev/null; ip netns del "$LAB-p" 2>/dev/null
ip link del "${LAB}h" 2>/dev/null
true
