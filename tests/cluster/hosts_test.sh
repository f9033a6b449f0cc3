#!/bin/bash
# The shipped dreamddp on two emulated hosts (tests/cluster/hosts.sh: h0 and h1, 2 ranks each, a 1 Gbit/s link),
# started the way docs/cluster.md shows. Root only (exit 77: skipped otherwise).
# usage: hosts_test.sh CASE BIN; CASE is one of
#   mpirun_gloo  mpirun --hostfile over ssh, --backend gloo, the ranks meeting in redis on h0
#   mpirun_mpi   mpirun --hostfile over ssh, --backend mpi
#   srun         srun -N2 -n4 under slurmctld/slurmd/munge, --backend gloo with redis on h0
#   srun_pmix    srun --mpi=pmix -N2 -n4, --backend mpi
#   sbatch       sbatch --wait tests/cluster/train.sbatch (both of its steps)
#   redis        RANK/WORLD_SIZE by hand on each host (through ssh), redis on h0, no shared directory
#   resume       srun: checkpoints, each host holding only its own ranks' files; a resume equals the uninterrupted
#                run bitwise, and one whose host lost a rank's file is refused naming host and file (srun -K)
#   iface        every host also on a second network (ddx0, 10.79.0.K+1/24) that does not reach the others: without
#                --iface the ranks bind the host name's address and train; --iface ddx0 fails with one line per
#                rank, exit 3, within the start-up wait (30 s) + 5 s
#   host_loss    --on-peer-loss shrink, 5 ranks by hand (0..2 on h0, 3..4 on h1), redis on h0: every rank pauses
#                after step 20 and all of h1's are SIGKILLed (a host lost at an exact step); h0's 3 (more than half
#                of 5) finish all 60 steps, exit 0, bitwise-equal parameters, one shrink event 5 -> 3 in metrics.h5
#   partition    the same, but h1's link goes down at the pause instead (ranks alive, redis out of their reach):
#                h0's 3 finish as above; h1's 2 exit 3 within 45 s of the cut; nothing hangs
#   bad_host     a hostfile naming a host that does not answer: mpirun fails within seconds
#   bad_world    WORLD_SIZE=2 exported, srun -n4: one line naming both, exit 2
#   bad_redis    --rendezvous redis://h0:6390/JOB with no redis there: one line, exit 2
#   bad_iface    --iface eth9 (no such interface): one line, exit 2
# Every case trains to the end (or fails as it should), checks that no rank, orted or slurmstepd is left on any
# host, and removes the hosts on every exit.
set -euo pipefail
case_=$1 bin=$(realpath "$2")
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network, UTS and mount namespaces)"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
hosts=$here/hosts.sh
src=$(cd "$here/../.." && pwd)
need() { for c in "$@"; do command -v "$c" >/dev/null || { echo "SKIP: no $c (make deps)"; exit 77; }; done; }
need ip tc nsenter unshare
name=dh$(($$ % 100000))
state=/tmp/ddhosts-$name
trap '"$hosts" down "$name" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*" >&2; for h in h0 h1; do echo "== processes on $h" >&2; "$hosts" pids "$name" "$h" >&2 || true; done; exit 1; }
on() { local h=$1; shift; "$hosts" exec "$name" "$h" "$@"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # = mpirun --allow-run-as-root, also for orted
base=(train --model mlp:width=64 --data synthetic --batch 16 --policy ddp --timeout 30 --lr-schedule const --warmup 0)
train=("${base[@]}" --steps 20)

"$hosts" up "$name" 2 1gbit >/dev/null
cd "$src"  # the build tree is visible on every host, as a home directory on NFS is
printf 'h0 slots=2\nh1 slots=2\n' >"$state/h0/tmp/hostfile"  # h0's /tmp

# Ranks 0 and 1 wrote their parameters on h0, 2 and 3 on h1 (each host's own /tmp): all four bitwise equal.
same_params() {  # same_params PATTERN (with %r): files under each host's /tmp
  local p=$1 f r
  for r in 0 1 2 3; do
    f=$state/h$((r / 2))/tmp/${p//%r/$r}
    [ -s "$f" ] || fail "rank $r wrote no parameters on h$((r / 2)) ($f)"
    [ -e "$state/h$((1 - r / 2))/tmp/${p//%r/$r}" ] && fail "rank $r's parameters are on the wrong host"
    cmp -s "$state/h0/tmp/${p//%r/0}" "$f" || fail "rank $r's parameters differ from rank 0's"
  done
  return 0
}

# Nothing of the job is left on either host: only the daemons the test started (and the host's holder).
nothing_left() {
  local h left=
  for _ in $(seq 50); do  # slurmstepd and orted exit shortly after their job: at most 5 s
    left=
    for h in h0 h1; do
      left+=$("$hosts" pids "$name" "$h" | grep -vE ' (sleep infinity|sshd: /usr/sbin/sshd -f /etc/ssh/sshd_config.*|redis-server .*|munged .*|slurmctld|: slurmscriptd|slurmd) *$' || true)
    done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "processes left on the hosts: $left"
}

# run_bad WHAT EXIT GREP CMD...: CMD, run on h0, fails with status EXIT within 60 s, and dreamddp says why in at most
# one line per rank (4), every one matching GREP.
run_bad() {
  local what=$1 want=$2 pattern=$3 rc=0 t0=$SECONDS; shift 3
  on h0 timeout 60 "$@" >"$state/out" 2>"$state/err" || rc=$?
  [ "$rc" != 124 ] || fail "$what: still running after 60 s"
  [ "$rc" = "$want" ] || { cat "$state/err"; fail "$what: exit $rc, expected $want"; }
  local lines; lines=$(grep -E '^dreamddp( [a-z]+)?: ' "$state/err" || true)
  [ -n "$lines" ] && [ "$(wc -l <<<"$lines")" -le 4 ] || fail "$what: expected one line per rank, got: $lines"
  grep -vqE "$pattern" <<<"$lines" && fail "$what: a line does not say '$pattern': $lines"
  echo "$what: exit $rc in $((SECONDS - t0)) s: $(head -n 1 <<<"$lines")"
  nothing_left
}

case $case_ in
  mpirun_gloo|mpirun_mpi)
    need sshd ssh mpirun redis-server
    "$hosts" start "$name" ssh
    if [ "$case_" = mpirun_gloo ]; then
      "$hosts" start "$name" redis
      conn=(--backend gloo --rendezvous "redis://h0:6379/job-$name")
    else
      conn=(--backend mpi)
    fi
    on h0 timeout 50 mpirun --hostfile /tmp/hostfile -n 4 "$bin" "${train[@]}" "${conn[@]}" \
      --save-params /tmp/p_%r.bin --out /tmp/run >"$state/log" 2>&1 || { cat "$state/log"; fail "mpirun exited $?"; }
    same_params p_%r.bin
    grep -q '"world": 4' "$state/h0/tmp/run/summary.json" || fail "summary.json on h0 does not say world 4"
    nothing_left ;;
  srun|srun_pmix)
    need slurmctld slurmd munged srun redis-server
    "$hosts" start "$name" slurm
    if [ "$case_" = srun ]; then
      "$hosts" start "$name" redis
      launch=(srun -N2 -n4) conn=(--backend gloo --rendezvous "redis://h0:6379/job-$name")
    else
      launch=(srun --mpi=pmix -N2 -n4) conn=(--backend mpi)
    fi
    on h0 timeout 50 "${launch[@]}" "$bin" "${train[@]}" "${conn[@]}" --save-params /tmp/p_%r.bin \
      --out /tmp/run >"$state/log" 2>&1 || { cat "$state/log"; fail "${launch[*]} exited $?"; }
    same_params p_%r.bin
    grep -q '"threads": 1' "$state/h0/tmp/run/summary.json" || fail "2 tasks per node did not default to 1 thread each"
    nothing_left ;;
  sbatch)
    need slurmctld slurmd munged sbatch redis-server
    "$hosts" start "$name" slurm
    "$hosts" start "$name" redis
    cp "$here/train.sbatch" "$state/h0/tmp/"
    # sbatch runs the script from the directory it was submitted in (the source tree); its log goes to /tmp on h0.
    on h0 env DREAMDDP="$bin" timeout 50 sbatch --wait --chdir "$src" --output /tmp/train-%j.out /tmp/train.sbatch \
      >"$state/log" 2>&1 || { cat "$state/log" "$state"/h0/tmp/train-*.out; fail "sbatch --wait exited $?"; }
    job=$(grep -oE 'Submitted batch job [0-9]+' "$state/log" | awk '{print $4}')
    [ -n "$job" ] || fail "sbatch printed no job id: $(cat "$state/log")"
    same_params "runs/$job/p_%r.bin"
    same_params "runs/$job/mpi_%r.bin"
    nothing_left ;;
  redis)
    need sshd ssh redis-server
    "$hosts" start "$name" ssh
    "$hosts" start "$name" redis
    # From h0, as a user does: rank r on host h(r/2), started through ssh.
    pids=()
    for r in 0 1 2 3; do
      on h0 timeout 50 ssh "h$((r / 2))" "cd '$src' && RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 '$bin' ${train[*]} \
        --backend gloo --rendezvous redis://h0:6379/job-$name --iface eth0 --save-params /tmp/p_%r.bin \
        --out /tmp/run" >"$state/log.$r" 2>&1 &
      pids+=($!)
    done
    for r in 0 1 2 3; do wait "${pids[$r]}" || { cat "$state/log.$r"; fail "rank $r exited with status $?"; }; done
    same_params p_%r.bin
    nothing_left ;;
  resume)
    need slurmctld slurmd munged srun redis-server
    "$hosts" start "$name" slurm
    "$hosts" start "$name" redis
    gloo=(--backend gloo --iface eth0)
    on h0 timeout 50 srun -N2 -n4 "$bin" "${base[@]}" "${gloo[@]}" --rendezvous "redis://h0:6379/$name-a" --steps 30 \
      --save-params /tmp/straight_%r.bin --out /tmp/straight >"$state/log" 2>&1 || { cat "$state/log"; fail "straight run"; }
    on h0 timeout 50 srun -N2 -n4 "$bin" "${base[@]}" "${gloo[@]}" --rendezvous "redis://h0:6379/$name-b" --steps 20 \
      --checkpoint-every 10 --out /tmp/run >"$state/log" 2>&1 || { cat "$state/log"; fail "run with checkpoints"; }
    [ -e "$state/h1/tmp/run/checkpoint.rank2.bin" ] && [ ! -e "$state/h0/tmp/run/checkpoint.rank2.bin" ] ||
      fail "rank 2's checkpoint is not on h1 alone"
    on h0 timeout 50 srun -N2 -n4 "$bin" "${base[@]}" "${gloo[@]}" --rendezvous "redis://h0:6379/$name-c" --steps 30 \
      --resume /tmp/run --save-params /tmp/p_%r.bin >"$state/log" 2>&1 || { cat "$state/log"; fail "resume"; }
    same_params p_%r.bin
    cmp -s "$state/h1/tmp/p_3.bin" "$state/h1/tmp/straight_3.bin" || fail "the resumed run differs from the straight one"
    rm "$state"/h1/tmp/run/checkpoint.rank2*
    # srun -K: rank 2 exits 2, srun ends the others at once (SIGTERM) and exits 143.
    run_bad "resume without rank 2's file" 143 'cannot read checkpoint /tmp/run/checkpoint.rank2.bin on host h1' \
      srun -K -N2 -n4 "$bin" "${base[@]}" "${gloo[@]}" --rendezvous "redis://h0:6379/$name-d" --steps 30 --resume /tmp/run
    grep -q 'h1: task 2: Exited with exit code 2' "$state/err" || fail "rank 2 did not exit 2: $(cat "$state/err")" ;;
  iface)
    need slurmctld slurmd munged srun redis-server
    "$hosts" start "$name" slurm
    "$hosts" start "$name" redis
    for k in 0 1; do  # a second network on each host: a link to a peer end without address, i.e. to nobody
      ip -n "$name-$k" link add ddx0 type veth peer name ddx1
      ip -n "$name-$k" addr add "10.79.0.$((k + 1))/24" dev ddx0
      ip -n "$name-$k" link set ddx0 up
      ip -n "$name-$k" link set ddx1 up
    done
    on h0 timeout 50 srun -N2 -n4 "$bin" "${train[@]}" --backend gloo --rendezvous "redis://h0:6379/$name-a" \
      --save-params /tmp/p_%r.bin --out /tmp/run >"$state/log" 2>&1 || { cat "$state/log"; fail "automatic interface"; }
    same_params p_%r.bin
    run_bad "--iface ddx0 (reaches no peer)" 3 'rendezvous failed after [0-9]+ s.*(No route to host|timed out)|did not complete within [0-9]+ s: a peer never connected' \
      srun -N2 -n4 "$bin" "${train[@]}" --backend gloo --iface ddx0 --rendezvous "redis://h0:6379/$name-b" \
      --out /tmp/run2 ;;
  host_loss|partition)
    # A quorum must be more than half of the world (docs/elastic.md): with 2 ranks per host, losing a host leaves
    # 2 of 4 and no quorum, so h0 runs 3 ranks and h1 2.
    need redis-server python3
    "$hosts" start "$name" redis
    source "$here/../common/pause.sh"
    steps=60 at=20 n=5
    shrink=(train --model mlp:width=64 --data synthetic --batch 8 --steps $steps --threads 1 --timeout 3 --policy ddp
            --lr-schedule const --warmup 0 --eval-every 0 --log-every 1 --on-peer-loss shrink --backend gloo
            --iface eth0 --rendezvous "redis://h0:6379/job-$name" --save-params /tmp/p_%r.bin --out /tmp/run)
    host_of() { if [ "$1" -lt 3 ]; then echo h0; else echo h1; fi; }
    pids=() ranks=()
    for r in 0 1 2 3 4; do
      h=$(host_of $r)
      if [ $h = h0 ]; then lr=$r lw=3; else lr=$((r - 3)) lw=2; fi
      on $h env DREAMDDP_PAUSE_AFTER_STEPS=$at RANK=$r WORLD_SIZE=$n LOCAL_RANK=$lr LOCAL_WORLD_SIZE=$lw "$bin" \
        "${shrink[@]}" >/dev/null 2>"$state/log.$r" &
      pids+=($!)
    done
    # The ranks' own pids (children of hosts.sh's nsenter, on their host's network): RANK=r in the environment.
    for _ in $(seq 300); do
      ranks=()
      for r in 0 1 2 3 4; do
        for p in $("$hosts" pids "$name" "$(host_of $r)" | awk '{print $1}'); do
          [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$bin" ] && tr '\0' '\n' <"/proc/$p/environ" | grep -qx "RANK=$r" &&
            { ranks+=("$p"); break; }
        done
      done
      [ ${#ranks[@]} = 5 ] && break
      for r in 0 1 2 3 4; do kill -0 "${pids[$r]}" 2>/dev/null || { cat "$state/log.$r"; fail "rank $r ended at start"; }; done
      sleep 0.1
    done
    [ ${#ranks[@]} = 5 ] || fail "not all 5 ranks started: ${ranks[*]}"
    wait_stopped "${ranks[@]}" || { tail -n 5 "$state"/log.*; fail "the ranks did not all pause after step $at"; }
    t0=$SECONDS
    if [ "$case_" = host_loss ]; then
      kill -9 "${ranks[3]}" "${ranks[4]}"
      kill -CONT "${ranks[0]}" "${ranks[1]}" "${ranks[2]}"
    else
      ip -n "$name-1" link set dev eth0 down
      kill -CONT "${ranks[@]}"
    fi
    # Every rank ends within 45 s of the fault (bounded: the hosts are torn down on any exit).
    for r in 0 1 2 3 4; do
      for _ in $(seq 450); do kill -0 "${ranks[$r]}" 2>/dev/null || break; sleep 0.1; done
      kill -0 "${ranks[$r]}" 2>/dev/null && { tail -n 5 "$state/log.$r"; fail "rank $r still running $((SECONDS - t0)) s after the fault"; }
      rc=0; wait "${pids[$r]}" || rc=$?
      if [ $r -lt 3 ]; then
        [ $rc = 0 ] || { tail -n 20 "$state/log.$r"; fail "rank $r on h0 exited $rc"; }
      elif [ "$case_" = partition ]; then
        [ $rc = 3 ] || { tail -n 20 "$state/log.$r"; fail "rank $r on the cut-off h1 exited $rc, expected 3"; }
        echo "rank $r on h1: exit 3 after $((SECONDS - t0)) s: $(grep -E '^dreamddp|on-peer-loss|no quorum' "$state/log.$r" | tail -n 1)"
      fi
    done
    echo "every rank ended within $((SECONDS - t0)) s of the fault"
    for r in 1 2; do
      cmp -s "$state/h0/tmp/p_0.bin" "$state/h0/tmp/p_$r.bin" || fail "rank $r's parameters differ from rank 0's"
    done
    line=$(grep -E '^shrink: 5 -> 3 ranks \(generation 1: lost rank 3, 4; ranks 0, 1, 2 now 0..2\)' "$state/log.0") ||
      { tail -n 20 "$state/log.0"; fail "no shrink line on rank 0"; }
    echo "$line"
    /usr/bin/python3 - "$state/h0/tmp/run/metrics.h5" $steps "$state/h0/tmp/run/summary.json" <<'PY' ||
import h5py, json, sys
f = h5py.File(sys.argv[1], "r")
steps = [int(s) for s in f["steps"]["step"]]
assert steps == list(range(int(sys.argv[2]))), steps
ev = f["events"]
dec = lambda v: v.decode() if isinstance(v, bytes) else str(v)
shrinks = [dec(d) for k, d in zip(ev["kind"], ev["detail"]) if dec(k) == "shrink"]
assert len(shrinks) == 1 and "5 -> 3 ranks" in shrinks[0], shrinks
s = json.load(open(sys.argv[3]))
assert s["world"] == 5 and s["world_at_end"] == 3, (s["world"], s.get("world_at_end"))
print("event: shrink: " + shrinks[0])
PY
      fail "metrics.h5 or summary.json on h0 does not show every step and one shrink 5 -> 3"
    nothing_left ;;
  bad_host)
    need sshd ssh mpirun
    "$hosts" start "$name" ssh
    # 10.77.200.9 is on the hosts' network, and nobody has it.
    printf 'h0 slots=2\n10.77.200.9 slots=2\n' >"$state/h0/tmp/hostfile.bad"
    rc=0 t0=$SECONDS
    on h0 timeout 60 mpirun --hostfile /tmp/hostfile.bad -n 4 "$bin" "${train[@]}" --backend mpi --out /tmp/run \
      >"$state/out" 2>"$state/err" || rc=$?
    head -n 1 "$state/err"
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "mpirun with an unreachable host exited $rc"
    grep -q 'ssh: connect to host 10.77.200.9 port 22' "$state/err" || fail "mpirun did not name the host: $(cat "$state/err")"
    echo "bad_host: mpirun exit $rc in $((SECONDS - t0)) s"
    nothing_left ;;
  bad_world)
    need slurmctld slurmd munged srun
    "$hosts" start "$name" slurm
    run_bad "WORLD_SIZE=2 under srun -n4" 2 'WORLD_SIZE=2 disagrees with SLURM_NTASKS=4' \
      env WORLD_SIZE=2 srun -N2 -n4 "$bin" "${train[@]}" --backend gloo --rendezvous redis://h0:6379/x --out /tmp/run ;;
  bad_redis)
    need slurmctld slurmd munged srun
    "$hosts" start "$name" slurm
    run_bad "no redis-server" 2 'cannot connect to redis rendezvous h0:6390' \
      srun -N2 -n4 "$bin" "${train[@]}" --backend gloo --rendezvous "redis://h0:6390/job-$name" --out /tmp/run ;;
  bad_iface)
    need slurmctld slurmd munged srun redis-server
    "$hosts" start "$name" slurm
    "$hosts" start "$name" redis
    run_bad "--iface eth9" 2 "network interface 'eth9' does not exist" \
      srun -N2 -n4 "$bin" "${train[@]}" --backend gloo --iface eth9 --rendezvous "redis://h0:6379/job-$name" \
      --out /tmp/run ;;
  *) echo "unknown case $case_" >&2; exit 2 ;;
esac
echo "PASS $case_"
