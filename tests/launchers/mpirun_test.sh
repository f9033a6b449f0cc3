#!/usr/bin/env bash
# The shipped dreamddp executable under mpiexec, as docs/cluster.md tells users to start it (one host, 2 ranks).
# usage: mpirun_test.sh CASE BIN MPIEXEC; CASE is one of
#   train_mpi    train --backend mpi: trains to the end, exit 0, ranks bitwise equal after ddp steps
#   bench_mpi    bench allreduce --backend mpi: every size correct, world 2
#   train_gloo   train --backend gloo, ranks from Open MPI's variables, a fresh file:// rendezvous
#   train_redis  the same with the ranks meeting in a redis-server (redis://127.0.0.1:PORT/JOB), no shared directory
#   binds        MPI_Init(_thread) in dreamddp binds to Open MPI's libmpi; SimGrid is only in dreamddp-sim, which has no libmpi
set -euo pipefail
case_=$1 bin=$2 mpiexec=$3
work=$(mktemp -d /tmp/dd-mpirun.XXXXXX)
redis_pid=
trap '[[ -n $redis_pid ]] && kill "$redis_pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The recipes' options: root needs --allow-run-as-root; 2 ranks on 2 cores, --oversubscribe where there are fewer.
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe -n 2)
train=(train --model mlp:width=64 --data synthetic --batch 16 --steps 20 --policy ddp --timeout 30)

same_params() {
  [[ -s $work/p_0.bin ]] || fail "rank 0 wrote no parameters"
  cmp "$work/p_0.bin" "$work/p_1.bin" || fail "ranks' parameters differ"
}

case $case_ in
  train_mpi)
    "${mpirun[@]}" "$bin" "${train[@]}" --backend mpi --save-params "$work/p_%r.bin" --out "$work/run" \
      >"$work/log" 2>&1 || { cat "$work/log"; fail "mpirun train --backend mpi exited $?"; }
    same_params
    /usr/bin/python3 - "$work/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["backend"] == "mpi" and s["world"] == 2 and s["steps"] == 20, s
assert s["final_loss"] is not None, s
PY
    ;;
  bench_mpi)
    "${mpirun[@]}" "$bin" bench allreduce --backend mpi --sizes 1K:64K --iters 3 >"$work/log" 2>&1 ||
      { cat "$work/log"; fail "mpirun bench allreduce --backend mpi exited $?"; }
    tail -n 1 "$work/log" | /usr/bin/python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
assert s["backend"] == "mpi" and s["world"] == 2, s
assert s["results"] and all(r["ok"] for r in s["results"]), s'
    ;;
  train_gloo)
    "${mpirun[@]}" "$bin" "${train[@]}" --backend gloo --rendezvous "file://$work/rdzv" \
      --save-params "$work/p_%r.bin" --out "$work/run" >"$work/log" 2>&1 ||
      { cat "$work/log"; fail "mpirun train --backend gloo exited $?"; }
    same_params
    grep -q '"world": 2' "$work/run/summary.json" || fail "summary.json does not say world 2"
    ;;
  train_redis)
    command -v redis-server >/dev/null || { echo "SKIP: no redis-server"; exit 77; }
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no >"$work/redis.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
    "${mpirun[@]}" "$bin" "${train[@]}" --backend gloo --rendezvous "redis://127.0.0.1:$port/job-$$" \
      --save-params "$work/p_%r.bin" --out "$work/run" >"$work/log" 2>&1 ||
      { cat "$work/log"; fail "mpirun train --backend gloo with a redis store exited $?"; }
    same_params
    ;;
  binds)
    libs=$(ldd "$bin")
    grep -q 'libmpi\.so' <<<"$libs" || fail "dreamddp does not link Open MPI's libmpi"
    ! grep -q libsimgrid <<<"$libs" || fail "dreamddp links SimGrid: its MPI_Init would shadow Open MPI's"
    sim="$(dirname "$bin")/dreamddp-sim"
    [[ -x $sim ]] || fail "no dreamddp-sim beside dreamddp"
    ! grep -q 'libmpi\.so' <<<"$(ldd "$sim")" || fail "dreamddp-sim links Open MPI beside SimGrid"
    # The dynamic linker's own record of where MPI_Init went, in a run that calls it (one rank, singleton MPI).
    LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld" "${mpiexec}" --allow-run-as-root -n 1 "$bin" bench allreduce \
      --backend mpi --sizes 1K --iters 1 >"$work/log" 2>&1 || { cat "$work/log"; fail "bench under mpiexec -n 1"; }
    line=$(cat "$work"/ld.* | grep -E "binding file [^ ]*/dreamddp .* normal symbol \`MPI_Init(_thread)?'" | head -n 1)
    [[ -n $line ]] || fail "no binding of MPI_Init or MPI_Init_thread from dreamddp was recorded"
    echo "$line"
    [[ $line == *libmpi.so* ]] || fail "MPI_Init bound elsewhere: $line"
    ;;
  *) echo "unknown case $case_" >&2; exit 2 ;;
esac
echo "PASS $case_"
