#!/bin/bash
D=${BASE:-/tmp/faultline-peers}/ipmi
[ -s $D/ipmi_sim.pid ] && { pid=$(cat $D/ipmi_sim.pid); kill $pid 2>/dev/null && for i in $(seq 1 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done; }
true
