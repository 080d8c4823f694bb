#!/usr/bin/env bash
# Socket collectives (llmc/comm_socket.h) between real processes on this machine: worlds of 1,
# 2, 3 and 4 ranks meeting through a shared directory (fs) or at HOST:PORT (tcp), a stale
# rendezvous file left by a dead run, handshake mistakes (wrong world size, one rank given
# twice), and a rank that dies or hangs: the others must stop with an error line, never hang.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/test_comm_socket
[ -x "$bin" ] || make -s "$bin"
scratch=$(mktemp -d)
declare -A pid   # NAME.TAG -> pid of `timeout 60 test_comm_socket ...`
cleanup() {
    for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# start NAME TAG RANK WORLD METHOD ARG TIMEOUT [MODE]: one rank in the background; its output
# goes to $scratch/NAME.TAG.out and .err. `timeout 60` so a bug can never hang CI.
start() {
    local name=$1 tag=$2; shift 2
    timeout 60 "$bin" "$@" > "$scratch/$name.$tag.out" 2> "$scratch/$name.$tag.err" &
    pid[$name.$tag]=$!
}
# finish NAME TAG WANT_RC: waits for that rank and checks its exit status
finish() {
    local rc=0
    wait "${pid[$1.$2]}" || rc=$?
    unset "pid[$1.$2]"
    [ $rc -eq "$3" ] ||
        fail "$1: rank $2 exited $rc, want $3: $(cat "$scratch/$1.$2.out" "$scratch/$1.$2.err" | tail -4)"
}
# expect_err NAME TAG TEXT: that rank's stderr holds the fixed string TEXT
expect_err() {
    grep -qF -- "$3" "$scratch/$1.$2.err" || fail "$1: rank $2 said \"$(cat "$scratch/$1.$2.err")\", want \"$3\""
}
# run_world NAME WORLD METHOD ARG [late0]: every rank must print PASS; late0 starts rank 0 last
run_world() {
    local name=$1 world=$2 method=$3 arg=$4 late=${5:-} t0 r
    t0=$(now_ms)
    for ((r = 1; r < world; r++)); do start "$name" $r $r "$world" "$method" "$arg" 20; done
    if [ -n "$late" ]; then sleep 0.5; fi
    start "$name" 0 0 "$world" "$method" "$arg" 20
    for ((r = 0; r < world; r++)); do
        finish "$name" $r 0
        grep -q "^rank $r: PASS$" "$scratch/$name.$r.out" || fail "$name: rank $r did not print PASS"
    done
    echo "ok $name: $world rank(s) over $method, every collective checked ($(( $(now_ms) - t0 )) ms)"
}

for d in w1 fs2 fs4 stale alone0 alone1 bad die hang; do mkdir "$scratch/$d"; done
run_world world1 1 fs "$scratch/w1"
run_world fs2 2 fs "$scratch/fs2"
[ ! -e "$scratch/fs2/gptrain_rendezvous" ] || fail "fs2: rank 0 left its rendezvous file behind"
echo "ok fs2: rank 0 removed its rendezvous file"
run_world fs4 4 fs "$scratch/fs4"

# a port nobody listens on (bash's /dev/tcp connects if somebody does)
for _ in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 20001))
    (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null || break
done
run_world tcp3 3 tcp "127.0.0.1:$port"

# a stale file from a dead run: ranks 1, 2 start first, read it, are refused, and wait for rank 0's
echo "127.0.0.1:1" > "$scratch/stale/gptrain_rendezvous"
run_world stale 3 fs "$scratch/stale" late0

# nobody to meet: each rendezvous gives up after its 1 s timeout, naming what it waited on
t0=$(now_ms)
echo "127.0.0.1:1" > "$scratch/alone1/gptrain_rendezvous"
start alone fs0 0 2 fs "$scratch/alone0" 1
start alone fs1 1 2 fs "$scratch/alone1" 1
start alone tcp1 1 2 tcp "127.0.0.1:$port" 1
for tag in fs0 fs1 tcp1; do finish alone $tag 1; done
expect_err alone fs0 "error: rank 0: only 0 of the 1 other ranks connected within 1 s (they look for rank 0 at \
the address in $scratch/alone0/gptrain_rendezvous"
expect_err alone fs1 "error: rank 1: rank 0 did not answer within 1 s at the address in \
$scratch/alone1/gptrain_rendezvous (127.0.0.1:1: Connection refused); stopping"
expect_err alone tcp1 "error: rank 1: rank 0 did not answer within 1 s at 127.0.0.1:$port \
(127.0.0.1:$port: Connection refused); stopping"
(( $(now_ms) - t0 < 5000 )) || fail "alone: a 1 s rendezvous timeout took $(( $(now_ms) - t0 )) ms"
echo "ok alone: \"$(sed 's/^error: //' "$scratch/alone.fs1.err")\""

# handshake mistakes are named by rank 0; the others see it go and stop too
t0=$(now_ms)
start world 1 1 3 fs "$scratch/bad" 20
start world 0 0 2 fs "$scratch/bad" 20
finish world 0 1
finish world 1 1
expect_err world 0 "error: rank 1 says world size 3, rank 0 has 2"
expect_err world 1 "lost the connection to rank 0"
start twice a 1 3 fs "$scratch/bad" 20
start twice b 1 3 fs "$scratch/bad" 20
start twice 0 0 3 fs "$scratch/bad" 20
finish twice 0 1
finish twice a 1
finish twice b 1
expect_err twice 0 "error: rank 1 connected twice"
(( $(now_ms) - t0 < 10000 )) || fail "handshake mistakes took $(( $(now_ms) - t0 )) ms (timeout is 20 s)"
echo "ok handshake: \"$(sed 's/^error: //' "$scratch/world.0.err")\""
echo "ok handshake: \"$(sed 's/^error: //' "$scratch/twice.0.err")\""

# rank 1 exits right after connecting: the others stop on the closed sockets, long before the
# 20 s timeout
t0=$(now_ms)
for r in 0 1 2; do start die $r $r 3 fs "$scratch/die" 20 die; done
finish die 1 3
finish die 0 1
finish die 2 1
ms=$(( $(now_ms) - t0 ))
expect_err die 0 "error: rank 0: lost the connection to rank "
expect_err die 2 "error: rank 2: lost the connection to rank 1 ("
for r in 0 2; do expect_err die $r ": it exited or crashed; stopping"; done
(( ms < 10000 )) || fail "die: the others took $ms ms to stop (timeout is 20 s)"
echo "ok die: ranks 0 and 2 stopped in $ms ms: \"$(sed 's/^error: //' "$scratch/die.2.err")\""

# rank 1 hangs: the rank waiting on it times out after 3 s; rank 0 waits on rank 2, and either
# times out too or sees rank 2 go first
t0=$(now_ms)
for r in 0 1 2; do start hang $r $r 3 fs "$scratch/hang" 3 hang; done
finish hang 0 1
finish hang 2 1
ms=$(( $(now_ms) - t0 ))
kill -0 "${pid[hang.1]}" 2> /dev/null || fail "hang: rank 1 was supposed to be hanging, it exited"
kill "${pid[hang.1]}"
finish hang 1 143  # timeout passes the TERM on, then dies of it
expect_err hang 2 "error: rank 2: no data from rank 1 for 3 s: it hung or died; stopping"
grep -q -e "hung or died" -e "lost the connection to rank 2" "$scratch/hang.0.err" ||
    fail "hang: rank 0: $(cat "$scratch/hang.0.err")"
(( ms >= 3000 && ms < 15000 )) || fail "hang: the others stopped after $ms ms (timeout 3 s)"
echo "ok hang: ranks 0 and 2 stopped in $ms ms: \"$(sed 's/^error: //' "$scratch/hang.2.err")\""
