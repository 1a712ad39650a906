#!/usr/bin/env bash
# Installs the Debian packages of the real third-party peers the tests run against
# (Slurm + munge, net-snmp, OpenIPMI ipmi_sim + ipmitool, node_exporter, iproute2, Chromium,
# PyTorch for the real-jobs suite),
# plus python3-venv, a JRE and Maven for the virtualenv and the broker jars.
# Idempotent: when every package is already installed, apt is not touched at all.
# Append a package to PACKAGES when your tests need one more.
set -euo pipefail

PACKAGES=(
    slurm-wlm slurmctld slurmd slurm-client munge
    slurmdbd mariadb-server
    snmpd snmp snmptrapd
    openipmi ipmitool
    prometheus-node-exporter
    # issue 17: the worker's /metrics scraped by a real Prometheus; alerts pushed to a real Alertmanager
    prometheus prometheus-alertmanager
    iproute2
    chromium
    curl bc
    # tests/realjobs: real 2-rank training jobs (CPU, gloo) under the Slurm peer; Debian's 1.13
    # build runs with /usr/bin/python3 (torchrun of that build is broken on 3.11: ranks use srun)
    python3-torch
    # toolchain `make test` itself needs on a fresh machine: the venv, the broker (JDK 17+ and
    # Maven for infra/kafka/kafka.sh jars); `make test` runs this script before both
    python3-venv openjdk-17-jre-headless maven
)

missing=()
for p in "${PACKAGES[@]}"; do
    # no pipe into grep -q: under pipefail an early grep exit SIGPIPEs dpkg and reports a
    # package missing at random (then every make test ran apt-get update)
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    echo "peers: all ${#PACKAGES[@]} packages installed"
    exit 0
fi
echo "peers: installing ${missing[*]}"
if [[ "$(id -u)" != 0 ]]; then
    SUDO=""
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
    if [[ -z "$SUDO" ]]; then
        echo "peers: error: not root and no password-less sudo: install them as root with" >&2
        echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
else
    SUDO=""
fi
export DEBIAN_FRONTEND=noninteractive
t0=$SECONDS
# the daemons must not start on install (no systemd here; tests start them by hand)
policy_added=0
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    policy_added=1
fi
cleanup() { if [[ $policy_added == 1 ]]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT
$SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "peers: installed ${#missing[@]} packages in $((SECONDS - t0)) s"
