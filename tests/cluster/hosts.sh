#!/bin/bash
# Emulated hosts that look like hosts to the programs a cluster user runs (ssh, mpirun, Slurm, redis, dreamddp).
# Needs root and iproute2 (util-linux's nsenter/unshare); ssh, munge and Slurm only for the daemons that use them.
#
#   hosts.sh up NAME N [RATE]    hosts h0 .. h(N-1) (N 1..9, RATE default 1gbit); removes an earlier NAME first
#   hosts.sh down NAME           kill every process on the hosts, remove namespaces, links and files (idempotent)
#   hosts.sh exec NAME HOST CMD...   run CMD on HOST (h0, h1, ...) in the current directory
#   hosts.sh start NAME WHAT     start daemons on every host: ssh (sshd), slurm (munged, slurmd; slurmctld on h0)
#                                or redis (redis-server on h0, port 6379)
#   hosts.sh pids NAME HOST      the processes on HOST, one "PID COMMAND" per line
#
# Host hK is the network namespace NAME-K of `experiments/netem_cluster.sh up` (eth0 = 10.77.200.(K+1)/24 on a
# private bridge, both directions shaped to RATE) plus a process that holds a UTS namespace (host name hK) and a
# private mount namespace: /tmp and /run are the host's own (empty at start, under NAME's state directory), and
# /etc/hosts (h0, h1, ... and localhost), /etc/ssh, /etc/munge and /etc/slurm are the cluster's (generated, the same
# on every host). Everything else, the build tree and the data included, is the machine's, as a home directory on
# NFS is on a cluster. Nothing of the machine's own network, /etc or /tmp is changed; the mounts exist only in the
# hosts' mount namespaces. ssh logs in as root with the cluster's key only, and only from 10.77.200.0/24.
# NAME: 1-8 lower-case letters/digits (it prefixes the namespaces and links); state in /tmp/ddhosts-NAME.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
netem_cluster=$here/../../experiments/netem_cluster.sh
die() { echo "hosts.sh: $*" >&2; exit 2; }
need_root() { [ "$(id -u)" = 0 ] || die "needs root (network, UTS and mount namespaces)"; }
check_name() { [[ ${1:-} =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "NAME must be 1-8 lower-case letters/digits, got '${1:-}'"; }
state_of() { echo "/tmp/ddhosts-$1"; }
host_index() { [[ $1 =~ ^h([0-9])$ ]] || die "HOST must be h0..h9, got '$1'"; echo "${BASH_REMATCH[1]}"; }
ns_pids() { ip netns pids "$1" 2>/dev/null || true; }

holder_pid() {  # the process that holds host $2's UTS and mount namespaces
  local s; s=$(state_of "$1")
  [ -s "$s/$2/pid" ] || die "no host $2 in cluster '$1' (hosts.sh up $1 N)"
  cat "$s/$2/pid"
}

on_host() {  # on_host NAME HOST CMD...: CMD in HOST's network, UTS and mount namespaces, same directory
  local name=$1 host=$2 pid; shift 2
  pid=$(holder_pid "$name" "$host")
  nsenter --target "$pid" --net --uts --mount --wd="$PWD" -- "$@"
}

write_config() {  # the files every host shares: /etc/hosts, ssh keys and configs, munge key, slurm.conf
  local s=$1 n=$2 k
  mkdir -p "$s/etc/ssh" "$s/etc/munge" "$s/etc/slurm"
  { echo "127.0.0.1 localhost"; for ((k = 0; k < n; k++)); do echo "10.77.200.$((k + 1)) h$k"; done; } >"$s/etc/hosts"
  ssh-keygen -q -t ed25519 -N '' -C "ddhosts host key" -f "$s/etc/ssh/ssh_host_ed25519_key"
  ssh-keygen -q -t ed25519 -N '' -C "ddhosts user key" -f "$s/etc/ssh/id_ed25519"
  local names=() ; for ((k = 0; k < n; k++)); do names+=("h$k" "10.77.200.$((k + 1))"); done
  echo "$(IFS=,; echo "${names[*]}") $(cut -d' ' -f1,2 "$s/etc/ssh/ssh_host_ed25519_key.pub")" >"$s/etc/ssh/known_hosts"
  echo "from=\"10.77.200.0/24\",no-port-forwarding,no-agent-forwarding,no-X11-forwarding $(cat "$s/etc/ssh/id_ed25519.pub")" \
    >"$s/etc/ssh/authorized_keys"
  chmod 600 "$s/etc/ssh/authorized_keys"
  cat >"$s/etc/ssh/sshd_config" <<'EOF'
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile /run/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile /etc/ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowUsers root@10.77.200.*
X11Forwarding no
AllowTcpForwarding no
LogLevel ERROR
EOF
  cat >"$s/etc/ssh/ssh_config" <<'EOF'
Host *
  IdentityFile /etc/ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile /etc/ssh/known_hosts
  GlobalKnownHostsFile /etc/ssh/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5
  ServerAliveInterval 5
  ServerAliveCountMax 2
  LogLevel ERROR
EOF
  head -c 1024 /dev/urandom >"$s/etc/munge/munge.key"
  chmod 700 "$s/etc/munge"; chmod 400 "$s/etc/munge/munge.key"
  local cpus; cpus=2
  {
    cat <<'EOF'
ClusterName=ddhosts
SlurmctldHost=h0
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/run/slurmctld
SlurmdSpoolDir=/run/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/run/slurmctld.log
SlurmdLogFile=/run/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
MessageTimeout=10
KillWait=2
InactiveLimit=0
EOF
    for ((k = 0; k < n; k++)); do echo "NodeName=h$k NodeAddr=10.77.200.$((k + 1)) CPUs=$cpus State=UNKNOWN"; done
    echo "PartitionName=hosts Nodes=h[0-$((n - 1))] Default=YES MaxTime=INFINITE State=UP"
  } >"$s/etc/slurm/slurm.conf"
}

up() {
  local name=${1:-} n=${2:-} rate=${3:-1gbit} s k
  check_name "$name"
  [[ $n =~ ^[1-9]$ ]] || die "up: N must be 1..9"
  command -v nsenter >/dev/null && command -v unshare >/dev/null || die "needs nsenter and unshare (util-linux)"
  command -v ssh-keygen >/dev/null || die "needs ssh-keygen (openssh-client)"
  down "$name"
  s=$(state_of "$name")
  trap 'down "$name" >/dev/null 2>&1' EXIT  # a failed step leaves nothing behind
  mkdir -p "$s"
  "$netem_cluster" up "$n" "$rate" "$name" >/dev/null
  write_config "$s" "$n"
  for ((k = 0; k < n; k++)); do
    mkdir -p "$s/h$k/tmp" "$s/h$k/run"
    chmod 1777 "$s/h$k/tmp"
    # The holder: sets the host name and the mounts, then sleeps; every command on the host joins its namespaces.
    # /tmp last: the state directory itself is under the machine's /tmp.
    setsid nsenter --net="/run/netns/$name-$k" unshare --uts --mount --propagation private -- bash -c '
      s=$1 k=$2
      hostname "h$k"
      mount --bind "$s/etc/hosts" /etc/hosts
      mount --bind "$s/etc/ssh" /etc/ssh
      [ -d /etc/munge ] && mount --bind "$s/etc/munge" /etc/munge
      [ -d /etc/slurm ] && mount --bind "$s/etc/slurm" /etc/slurm
      mount --bind "$s/h$k/run" /run
      mkdir -p /run/sshd /run/munge /run/slurmd /run/slurmctld /run/lock
      chmod 711 /run/munge
      echo $$ >"$s/h$k/pid.new"
      mount --bind "$s/h$k/tmp" /tmp
      exec sleep infinity' holder "$s" "$k" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 100); do [ -s "$s/h$k/pid.new" ] && break; sleep 0.05; done
    [ -s "$s/h$k/pid.new" ] || die "up: host h$k did not start"
    mv "$s/h$k/pid.new" "$s/h$k/pid"
  done
  trap - EXIT
  echo "hosts.sh: cluster $name: hosts h0..h$((n - 1)) at 10.77.200.1..$n, links $rate"
}

down() {
  local name=${1:-} s ns pids
  check_name "$name"
  s=$(state_of "$name")
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-[0-9]+$" || true); do
    pids=$(ns_pids "$ns"); [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
  done
  for _ in $(seq 40); do  # at most 2 s for a clean exit, then SIGKILL
    pids=$(for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-[0-9]+$" || true); do ns_pids "$ns"; done)
    [ -z "$pids" ] && break
    sleep 0.05
  done
  [ -n "${pids:-}" ] && kill -KILL $pids 2>/dev/null || true
  "$netem_cluster" down "$name"
  rm -rf "$s"
}

start() {
  local name=${1:-} what=${2:-} s h k n
  check_name "$name"; s=$(state_of "$name")
  n=$(ls -d "$s"/h[0-9] 2>/dev/null | wc -l)
  [ "$n" -ge 1 ] || die "start: no cluster '$name' (hosts.sh up $name N)"
  case $what in
    ssh)
      for ((k = 0; k < n; k++)); do on_host "$name" "h$k" /usr/sbin/sshd -f /etc/ssh/sshd_config; done
      for ((k = 0; k < n; k++)); do wait_for "$name" h0 "h$k" 22 sshd; done ;;
    redis)
      command -v redis-server >/dev/null || die "start: no redis-server (make deps)"
      on_host "$name" h0 redis-server --bind 0.0.0.0 --port 6379 --save '' --appendonly no --protected-mode no \
        --daemonize yes --logfile /run/redis.log --pidfile /run/redis.pid
      wait_for "$name" h0 h0 6379 redis-server ;;
    slurm)
      command -v slurmctld >/dev/null && command -v munged >/dev/null || die "start: no slurmctld/munged (make deps)"
      for ((k = 0; k < n; k++)); do
        on_host "$name" "h$k" munged --force --seed-file=/run/munge/seed --log-file=/run/munge/munged.log
      done
      on_host "$name" h0 slurmctld
      wait_for "$name" h0 h0 6817 slurmctld
      for ((k = 0; k < n; k++)); do on_host "$name" "h$k" slurmd; done
      for _ in $(seq 100); do  # every node registered and idle
        [ "$(on_host "$name" h0 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" = "$n" ] && return 0
        sleep 0.1
      done
      die "start: the Slurm nodes did not all come up idle within 10 s: $(on_host "$name" h0 sinfo -N 2>&1 | tr '\n' ' ')" ;;
    *) die "start: WHAT must be ssh, slurm or redis" ;;
  esac
}

wait_for() {  # wait_for NAME FROM HOST PORT WHAT: up to 5 s for HOST:PORT to accept a connection from FROM
  local name=$1 from=$2 host=$3 port=$4
  for _ in $(seq 100); do
    on_host "$name" "$from" bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null && return 0
    sleep 0.05
  done
  die "start: $5 on $host did not listen on port $port within 5 s"
}

cmd=${1:-}
shift || true
case $cmd in
  up) need_root; up "$@" ;;
  down) need_root; down "$@" ;;
  exec) need_root; [ $# -ge 3 ] || die "exec NAME HOST CMD..."; check_name "$1"; host_index "$2" >/dev/null; on_host "$@" ;;
  start) need_root; start "$@" ;;
  pids) need_root; check_name "${1:-}"; k=$(host_index "${2:-}"); for p in $(ns_pids "$1-$k"); do
          echo "$p $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)"; done ;;
  -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
     die "${cmd:+unknown command '$cmd'; }expected up, down, exec, start or pids (usage above)" ;;
esac
