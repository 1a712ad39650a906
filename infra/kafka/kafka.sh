#!/usr/bin/env bash
# Local Apache Kafka (KRaft) for development and tests: one node (broker + controller), or a
# cluster of KAFKA_NODES nodes on loopback, each broker + controller (combined mode; separate
# controller processes are not offered), with its own ports, data dir, logs and pid file.
#
#   infra/kafka/kafka.sh jars     fetch the broker jars from Maven Central into infra/kafka/lib/
#   infra/kafka/kafka.sh up       fetch jars if missing, format storage once, start, wait until ready
#   infra/kafka/kafka.sh down     stop by PID (TERM, wait, KILL)
#   infra/kafka/kafka.sh status   exit 0 when running, 3 when not
#   infra/kafka/kafka.sh wait     wait until the running broker answers
#   infra/kafka/kafka.sh kill N   SIGKILL node N (a crash; `up` brings it back)
#   infra/kafka/kafka.sh bootstrap  print the bootstrap servers (host:port,...)
#   infra/kafka/kafka.sh controller print the node id of the active controller (the KRaft quorum
#                                   leader, via the Admin API: QuorumLeader.java; PLAINTEXT only)
#
# Environment:
#   KAFKA_PORT             client port on 127.0.0.1 (default 9092)
#   KAFKA_CONTROLLER_PORT  KRaft controller port (default KAFKA_PORT+1)
#   KAFKA_VAR              data, logs, pid file (default <repo>/var/kafka)
#   KAFKA_HEAP_OPTS        JVM heap (default -Xms256m -Xmx512m)
#   KAFKA_JVM_OPTS         other JVM options (default: serial GC, C1 JIT only)
#   KAFKA_CDS              1 (default): class-data archive in lib/ for faster starts; 0: off
#   KAFKA_WAIT_SECS        how long `up`/`wait` wait for readiness (default 90)
#   KAFKA_PARTITIONS       num.partitions of auto-created topics (default 6)
#   KAFKA_WATCH_PID        stop the broker when this process exits (test sessions use it so a
#                          killed pytest leaves no broker behind)
#   JAVA                   java binary (default $JAVA_HOME/bin/java, else java on PATH; needs 17+)
# Cluster (docs/kafka.md):
#   KAFKA_NODES            number of nodes (default 1); with N > 1 node i (1..N) lives in
#                          $KAFKA_VAR/node<i>, every node is a voter of the KRaft quorum,
#                          internal topics get replication min(3, N) and min ISR min(2, N)
#   KAFKA_PORTS            client ports, comma separated (default KAFKA_PORT, KAFKA_PORT+1, ...)
#   KAFKA_CONTROLLER_PORTS controller ports (default KAFKA_CONTROLLER_PORT, +1, ...; that one
#                          defaults to KAFKA_PORT+N)
# Security (the client listener; the controller listener stays PLAINTEXT on loopback):
#   KAFKA_SECURITY         PLAINTEXT (default) or SASL_SSL (SCRAM-SHA-512 only, no PLAINTEXT port)
#   KAFKA_SSL_KEYSTORE     SASL_SSL: PEM file with the broker's unencrypted PKCS#8 key + cert chain
#   KAFKA_SSL_CAFILE       SASL_SSL: PEM file of the CA the brokers trust (each other's certs)
#   KAFKA_SCRAM_USER       SASL_SSL: a client user created when the storage is formatted
#   KAFKA_SCRAM_PASSWORD_FILE  file holding that user's password (not in the environment; it is
#                          an argument of the one-time format step, never of the broker)
#                          The brokers' own user (inter-broker) gets a random password kept in
#                          $KAFKA_VAR/.broker-secret (mode 600).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
LIB="$HERE/lib"
PORT="${KAFKA_PORT:-9092}"
NODES="${KAFKA_NODES:-1}"
[[ "$NODES" =~ ^[1-9][0-9]?$ ]] || { echo "kafka: error: KAFKA_NODES must be 1-99, got $NODES" >&2; exit 2; }
CPORT="${KAFKA_CONTROLLER_PORT:-$((PORT + NODES))}"
VAR="${KAFKA_VAR:-$REPO/var/kafka}"
SECURITY="${KAFKA_SECURITY:-PLAINTEXT}"
case "$SECURITY" in PLAINTEXT|SASL_SSL) ;; *) echo "kafka: error: KAFKA_SECURITY must be PLAINTEXT or SASL_SSL, got $SECURITY" >&2; exit 2 ;; esac
# ports of every node: listed, or consecutive from the first
if [[ -n "${KAFKA_PORTS:-}" ]]; then IFS=, read -r -a PORTS <<<"$KAFKA_PORTS"
else PORTS=(); for ((i = 0; i < NODES; i++)); do PORTS+=($((PORT + i))); done; fi
if [[ -n "${KAFKA_CONTROLLER_PORTS:-}" ]]; then IFS=, read -r -a CPORTS <<<"$KAFKA_CONTROLLER_PORTS"
else CPORTS=(); for ((i = 0; i < NODES; i++)); do CPORTS+=($((CPORT + i))); done; fi
((${#PORTS[@]} == NODES && ${#CPORTS[@]} == NODES)) \
    || { echo "kafka: error: KAFKA_PORTS and KAFKA_CONTROLLER_PORTS need $NODES ports each" >&2; exit 2; }
# internal topics: as many replicas as the cluster allows, up to 3
REPL=$((NODES < 3 ? NODES : 3))
MIN_ISR=$((REPL < 2 ? REPL : 2))
WAIT_SECS="${KAFKA_WAIT_SECS:-90}"
HEAP="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
# C1 only and the serial GC: a dev/test broker on a small shared machine should start fast
# and use little CPU; its throughput is never the bottleneck of the Python pipeline
JVM_OPTS="${KAFKA_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
# AppCDS class archive: written by the first broker that stops cleanly, used by every
# later start (start-up CPU roughly halves); KAFKA_CDS=0 disables it
CDS="${KAFKA_CDS:-1}"
JSA="$LIB/kafka-classes.jsa"
PARTITIONS="${KAFKA_PARTITIONS:-6}"

select_node() {
    # Point PIDFILE, LOGDIR, DATADIR, CONF, NODE_ID, PORT, CPORT at node $1 (1-based). One node
    # keeps the historical layout directly in $VAR; a cluster's node i lives in $VAR/node<i>.
    NODE_ID="$1"
    local dir="$VAR"
    ((NODES > 1)) && dir="$VAR/node$NODE_ID"
    NODEDIR="$dir"
    PIDFILE="$dir/kafka.pid"
    LOGDIR="$dir/logs"
    DATADIR="$dir/data"
    CONF="$dir/server.properties"
    PORT="${PORTS[$((NODE_ID - 1))]}"
    CPORT="${CPORTS[$((NODE_ID - 1))]}"
}
select_node 1
VOTERS=""
for ((i = 0; i < NODES; i++)); do VOTERS+="${VOTERS:+,}$((i + 1))@127.0.0.1:${CPORTS[$i]}"; done
BOOTSTRAP=""
for p in "${PORTS[@]}"; do BOOTSTRAP+="${BOOTSTRAP:+,}127.0.0.1:$p"; done

if [[ -n "${JAVA:-}" ]]; then :
elif [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"
else JAVA="java"; fi

say() { echo "kafka: $*"; }
die() { echo "kafka: error: $*" >&2; exit 1; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running_pid() {
    # PID of the broker of this KAFKA_VAR, or nothing (stale pid files are ignored).
    [[ -f "$PIDFILE" ]] || return 1
    local pid; pid="$(cat "$PIDFILE" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "kafka.Kafka $CONF" || return 1
    echo "$pid"
}

cmd_jars() {
    [[ -f "$LIB/.complete" ]] && return 0
    command -v mvn >/dev/null || die "mvn not found: install Maven (apt-get install -y maven) and Java 17+"
    mkdir -p "$LIB"
    (
        flock -w 600 9 || die "another jar fetch holds the lock for 10 min"
        [[ -f "$LIB/.complete" ]] && exit 0
        say "fetching broker jars from Maven Central into $LIB (first time only)"
        local t0=$SECONDS
        mvn -q -B -f "$HERE/pom.xml" package >"$HERE/lib/.mvn.log" 2>&1 \
            || { tail -30 "$HERE/lib/.mvn.log" >&2; die "Maven could not fetch the jars (log: $LIB/.mvn.log)"; }
        rm -rf "$HERE/target"
        rm -f "$JSA"  # a class archive of other jars would be ignored: rebuild it
        touch "$LIB/.complete"
        say "jars ready in $((SECONDS - t0)) s ($(ls "$LIB"/*.jar | wc -l) jars)"
    ) 9>"$LIB/.lock"
}

listener_config() {
    # the client listener of this node (PLAINTEXT or SASL_SSL) and what it needs
    if [[ "$SECURITY" == PLAINTEXT ]]; then
        cat <<EOF
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
EOF
        return
    fi
    local secret; secret="$(cat "$VAR/.broker-secret")"
    cat <<EOF
listeners=SASL_SSL://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=SASL_SSL://127.0.0.1:$PORT
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="fl-broker" password="$secret";
ssl.keystore.type=PEM
ssl.keystore.location=$KAFKA_SSL_KEYSTORE
ssl.truststore.type=PEM
ssl.truststore.location=$KAFKA_SSL_CAFILE
ssl.client.auth=none
EOF
}

check_security() {
    [[ "$SECURITY" == SASL_SSL ]] || return 0
    [[ -r "${KAFKA_SSL_KEYSTORE:-}" ]] || die "KAFKA_SECURITY=SASL_SSL needs KAFKA_SSL_KEYSTORE (PEM key + cert), got '${KAFKA_SSL_KEYSTORE:-}'"
    [[ -r "${KAFKA_SSL_CAFILE:-}" ]] || die "KAFKA_SECURITY=SASL_SSL needs KAFKA_SSL_CAFILE (PEM CA), got '${KAFKA_SSL_CAFILE:-}'"
    if [[ -n "${KAFKA_SCRAM_USER:-}" ]]; then
        [[ -r "${KAFKA_SCRAM_PASSWORD_FILE:-}" ]] || die "KAFKA_SCRAM_USER needs KAFKA_SCRAM_PASSWORD_FILE (a readable file)"
    fi
    if [[ ! -s "$VAR/.broker-secret" ]]; then
        (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$VAR/.broker-secret")
    fi
}

scram_args() {
    # StorageTool --add-scram arguments: the brokers' user and KAFKA_SCRAM_USER
    [[ "$SECURITY" == SASL_SSL ]] || return 0
    echo "--add-scram"
    echo "SCRAM-SHA-512=[name=fl-broker,password=$(cat "$VAR/.broker-secret")]"
    if [[ -n "${KAFKA_SCRAM_USER:-}" ]]; then
        echo "--add-scram"
        echo "SCRAM-SHA-512=[name=$KAFKA_SCRAM_USER,password=$(cat "$KAFKA_SCRAM_PASSWORD_FILE")]"
    fi
}

write_config() {
    mkdir -p "$LOGDIR" "$DATADIR"
    (umask 077; : >"$CONF")   # it may hold the brokers' SCRAM secret
    cat >"$CONF" <<EOF
# generated by infra/kafka/kafka.sh on every start; edit the script, not this file
process.roles=broker,controller
node.id=$NODE_ID
controller.quorum.voters=$VOTERS
controller.listener.names=CONTROLLER
$(listener_config)
log.dirs=$DATADIR
# internal topics: min(3, nodes) replicas, min ISR min(2, nodes); contract topics get theirs
# from \`faultline topics create\` (docs/kafka.md)
default.replication.factor=$REPL
offsets.topic.replication.factor=$REPL
offsets.topic.num.partitions=12
transaction.state.log.replication.factor=$REPL
transaction.state.log.min.isr=$MIN_ISR
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=$REPL
share.coordinator.state.topic.min.isr=$MIN_ISR
# consumers join at once (tests, workers)
group.initial.rebalance.delay.ms=0
# dev convenience: a topic produced to before \`faultline topics create\` gets the default
# partition count; production clusters should turn this off and create topics explicitly
auto.create.topics.enable=true
num.partitions=$PARTITIONS
delete.topic.enable=true
# retention defaults (per-topic retention is set by \`faultline topics create\`)
log.retention.hours=168
log.segment.bytes=134217728
log.retention.check.interval.ms=60000
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
message.max.bytes=1048588
EOF
}

each_node() {
    # run "$@" for every node in turn (select_node first); the first failure's status is returned
    local i rc=0
    for ((i = 1; i <= NODES; i++)); do select_node "$i"; "$@" || rc=$?; done
    return $rc
}

node_status() {
    local pid
    if pid="$(running_pid)"; then
        if port_open "$PORT"; then say "node $NODE_ID running (pid $pid) on 127.0.0.1:$PORT, data $NODEDIR"
        else say "node $NODE_ID starting (pid $pid), 127.0.0.1:$PORT not answering yet"; fi
        return 0
    fi
    if port_open "$PORT"; then say "node $NODE_ID not started by this script, but 127.0.0.1:$PORT is in use"; return 3; fi
    say "node $NODE_ID not running (127.0.0.1:$PORT, data $NODEDIR)"
    return 3
}

cmd_status() {
    each_node node_status
}

wait_ready() {
    # Ready = client port answers and the server logged that it started (metadata loaded).
    local pid="$1" since="$2" deadline=$((SECONDS + WAIT_SECS))
    while ((SECONDS < deadline)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -40 "$LOGDIR/kafka.out" >&2 || true
            die "broker exited during start-up (logs: $LOGDIR/server.log, $LOGDIR/kafka.out)"
        fi
        if port_open "$PORT" && tail -c +"$since" "$LOGDIR/server.log" 2>/dev/null | grep -q "Kafka Server started"; then
            return 0
        fi
        sleep 0.2
    done
    die "broker not ready on 127.0.0.1:$PORT after ${WAIT_SECS}s (logs: $LOGDIR/server.log)"
}

node_wait() {
    local pid; pid="$(running_pid)" || die "node $NODE_ID not running (start it with \`make kafka-up\`)"
    wait_ready "$pid" "${1:-1}"
}

cmd_wait() {
    each_node node_wait
    say "ready on $BOOTSTRAP"
}

cluster_id() {
    # one id for every node of $VAR: 16 random bytes, base64url without padding (as Kafka's
    # Uuid), not starting with '-'; kept in $VAR/cluster.id
    if [[ ! -s "$VAR/cluster.id" ]]; then
        local cid=""
        while [[ -z "$cid" || "$cid" == -* ]]; do
            cid="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
        done
        echo "$cid" >"$VAR/cluster.id"
    fi
    cat "$VAR/cluster.id"
}

jvm_args() {
    JVM=(-cp "$LIB/*" $HEAP $JVM_OPTS -Djava.awt.headless=true
        -Dkafka.logs.dir="$LOGDIR" -Dlog4j2.configurationFile="$HERE/log4j2.properties")
}

node_start() {
    # start this node (not waiting); sets STARTED_PID and STARTED_SINCE; no-op when running
    local pid
    STARTED_PID="" STARTED_SINCE=1
    if pid="$(running_pid)"; then
        say "node $NODE_ID already up (pid $pid) on 127.0.0.1:$PORT"
        return 0
    fi
    port_open "$PORT" && die "127.0.0.1:$PORT is already in use by another process: set KAFKA_PORT(S) or stop it"
    port_open "$CPORT" && die "controller port 127.0.0.1:$CPORT is already in use: set KAFKA_CONTROLLER_PORT(S)"
    write_config
    jvm_args
    local cds=()
    if [[ "$CDS" == 1 ]]; then
        if [[ -f "$JSA" ]]; then cds=(-XX:SharedArchiveFile="$JSA" -Xlog:cds=off -Xlog:cds+dynamic=off)
        elif ((NODES == 1)); then
            # the first clean stop writes the archive (one node only: nodes would race for it)
            rm -f "$VAR/classes.jsa"; cds=(-XX:ArchiveClassesAtExit="$VAR/classes.jsa" -Xlog:cds=off -Xlog:cds+dynamic=off)
        fi
    fi
    if [[ ! -f "$DATADIR/meta.properties" ]]; then
        local cid; cid="$(cluster_id)"
        local fmt_cds=() scram=()
        [[ "$CDS" == 1 && -f "$JSA" ]] && fmt_cds=(-XX:SharedArchiveFile="$JSA" -Xlog:cds=off -Xlog:cds+dynamic=off)
        mapfile -t scram < <(scram_args)
        "$JAVA" "${JVM[@]}" "${fmt_cds[@]}" kafka.tools.StorageTool format -t "$cid" -c "$CONF" --ignore-formatted \
            "${scram[@]}" >>"$LOGDIR/format.log" 2>&1 \
            || { grep -v -i password "$LOGDIR/format.log" >&2; die "formatting $DATADIR failed"; }
        say "formatted $DATADIR (cluster $cid, node $NODE_ID)"
    fi
    STARTED_SINCE=$(( $(stat -c %s "$LOGDIR/server.log" 2>/dev/null || echo 0) + 1 ))
    nohup "$JAVA" "${JVM[@]}" "${cds[@]}" kafka.Kafka "$CONF" >>"$LOGDIR/kafka.out" 2>&1 </dev/null 8>&- &
    STARTED_PID=$!
    echo "$STARTED_PID" >"$PIDFILE"
    if [[ -n "${KAFKA_WATCH_PID:-}" ]]; then
        # watchdog: TERM the broker once the watched process is gone
        nohup bash -c 'while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 2; done
                       kill -TERM "$2" 2>/dev/null' watchdog "$KAFKA_WATCH_PID" "$STARTED_PID" \
            >/dev/null 2>&1 </dev/null 8>&- &
    fi
}

cmd_up() {
    # start every node of $VAR that is not running (all at once: a KRaft quorum needs a
    # majority of its voters before any broker is ready), then wait for each
    mkdir -p "$VAR"
    exec 8>"$VAR/.lock"
    flock -w 120 8 || die "another start/stop of $VAR holds the lock"
    "$JAVA" -version >/dev/null 2>&1 || die "java not found: install a JDK 17+ or set JAVA_HOME"
    cmd_jars
    check_security
    local t0; t0="$(date +%s%N)"
    local pids=() sinces=() i
    for ((i = 1; i <= NODES; i++)); do
        select_node "$i"
        node_start
        pids+=("$STARTED_PID"); sinces+=("$STARTED_SINCE")
    done
    local cpu=0
    for ((i = 1; i <= NODES; i++)); do
        [[ -n "${pids[$((i - 1))]}" ]] || continue
        select_node "$i"
        wait_ready "${pids[$((i - 1))]}" "${sinces[$((i - 1))]}"
        cpu=$((cpu + $(awk '{print $14 + $15}' "/proc/${pids[$((i - 1))]}/stat" 2>/dev/null || echo 0)))
    done
    local t1; t1="$(date +%s%N)"
    if ((NODES == 1)); then
        select_node 1
        [[ -n "${pids[0]}" ]] && say "up (pid ${pids[0]}) on 127.0.0.1:$PORT in $(( (t1 - t0) / 1000000 )) ms (broker CPU $((cpu * 10)) ms), data $VAR"
    else
        say "cluster of $NODES up on $BOOTSTRAP in $(( (t1 - t0) / 1000000 )) ms (brokers' CPU $((cpu * 10)) ms), data $VAR"
    fi
    return 0
}

node_stop() {
    # stop this node: TERM, wait up to 30 s, KILL ("$1" = KILL: kill -9 at once, as a crash;
    # "$1" = TERM: send TERM only, node_reap waits)
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$PIDFILE"
        say "node $NODE_ID not running (127.0.0.1:$PORT, data $NODEDIR)"
        return 0
    fi
    if [[ "${1:-}" == KILL ]]; then
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        rm -f "$PIDFILE"
        say "node $NODE_ID killed (pid $pid, SIGKILL)"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    [[ "${1:-}" == TERM ]] && return 0
    node_reap
}

node_reap() {
    # wait for this node's TERMed process (30 s, then KILL), publish its class archive
    local pid
    pid="$(running_pid)" || { rm -f "$PIDFILE"; return 0; }
    local i
    for ((i = 0; i < 150; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "pid $pid ignored TERM for 30 s: KILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$PIDFILE"
    if [[ -s "$VAR/classes.jsa" && ! -f "$JSA" && -d "$LIB" ]]; then
        # publish the class archive this broker wrote at exit (atomic rename in lib/)
        cp "$VAR/classes.jsa" "$JSA.tmp.$$" && mv -f "$JSA.tmp.$$" "$JSA" || rm -f "$JSA.tmp.$$"
    fi
    rm -f "$VAR/classes.jsa"
    say "node $NODE_ID stopped (pid $pid)"
}

cmd_down() {
    mkdir -p "$VAR"
    exec 8>"$VAR/.lock"
    flock -w 120 8 || die "another start/stop of $VAR holds the lock"
    if ((NODES == 1)); then select_node 1; node_stop; return; fi
    # a cluster: TERM every node at once, then wait for each. One by one, the last nodes would
    # lose the quorum their controlled shutdown asks, and wait the full 30 s for the KILL.
    local i
    for ((i = 1; i <= NODES; i++)); do select_node "$i"; node_stop TERM; done
    for ((i = 1; i <= NODES; i++)); do select_node "$i"; node_reap; done
}

cmd_kill() {
    # SIGKILL one node (a crash); `up` brings it back
    local n="${1:-}"
    [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= NODES)) || die "usage: kill NODE (1..$NODES)"
    mkdir -p "$VAR"
    exec 8>"$VAR/.lock"
    flock -w 120 8 || die "another start/stop of $VAR holds the lock"
    select_node "$n"
    node_stop KILL
}

cmd_controller() {
    # the active controller = the leader of the metadata quorum (Admin describeMetadataQuorum)
    [[ "$SECURITY" == PLAINTEXT ]] || die "controller: only for a PLAINTEXT cluster (KAFKA_SECURITY=$SECURITY)"
    "$JAVA" -version >/dev/null 2>&1 || die "java not found: install a JDK 17+ or set JAVA_HOME"
    # compiled once into $VAR (javac next to java; else java runs the source file, ~2x slower)
    local out cls="$VAR/.tools" javac="${JAVA%java}javac" main=("$HERE/QuorumLeader.java")
    [[ -x "$javac" ]] || javac="$(command -v javac || true)"
    if [[ -n "$javac" ]]; then
        if [[ ! -f "$cls/QuorumLeader.class" || "$HERE/QuorumLeader.java" -nt "$cls/QuorumLeader.class" ]]; then
            mkdir -p "$cls"
            "$javac" -J-XX:TieredStopAtLevel=1 -cp "$LIB/*" -d "$cls" "$HERE/QuorumLeader.java" \
                || die "controller: compiling QuorumLeader.java failed"
        fi
        main=(QuorumLeader)
    fi
    out="$("$JAVA" -cp "$LIB/*:$cls" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$HERE/log4j2.properties" -Dkafka.logs.dir="${TMPDIR:-/tmp}" \
        "${main[@]}" "$BOOTSTRAP" 2>&1)" \
        || die "controller: the quorum of $BOOTSTRAP did not answer: $(tail -n 3 <<<"$out")"
    [[ "$(tail -n 1 <<<"$out")" =~ ^[0-9]+$ ]] || die "controller: unexpected answer: $(tail -n 3 <<<"$out")"
    tail -n 1 <<<"$out"
}

case "${1:-}" in
    jars) cmd_jars ;;
    up) cmd_up ;;
    down) cmd_down ;;
    kill) cmd_kill "${2:-}" ;;
    status) cmd_status ;;
    wait) cmd_wait ;;
    bootstrap) echo "$BOOTSTRAP" ;;
    controller) cmd_controller ;;
    *) echo "usage: $0 jars|up|down|status|wait|bootstrap|controller|kill NODE" >&2; exit 2 ;;
esac
