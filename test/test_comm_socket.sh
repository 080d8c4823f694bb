#!/usr/bin/env bash
# The socket bootstrap (llmc/comm_socket.h) between real processes on this machine: worlds of 1,
# 2, 3 and 4 ranks meeting through a shared directory (fs) or at HOST:PORT (tcp) and exchanging
# records of every size (the bootstrap's one collective, which carries NCCL's id), a stale
# rendezvous file left by a dead run, handshake mistakes (wrong world size, one rank given
# twice), and a rank that dies or hangs: the others must stop with an error line, never hang.
# Who may join: SHA-256 and HMAC-SHA256 against the standards' known answers and Python's
# hashlib/hmac; the job secret (GPTRAIN_SOCKET_SECRET, or -pi fs's generated file, mode 0600,
# gone once all joined; a file open to others is refused); a rank with another secret, and
# Python peers with a wrong proof, a valid proof from another world, a version-1 hello, garbage,
# a port scan and silent connections at rank 0's rendezvous port: each refused with one line
# naming it while the job completes; a fake rank 0 that cannot prove
# itself; tcp without a secret (loopback only, with a warning); the listeners' addresses
# (GPTRAIN_SOCKET_IFNAME, -ps, the fs default), seen from outside with ss and connect attempts.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/test_comm_socket
make -s "$bin"
PY=${PYTHON:-/usr/bin/python3}
unset GPTRAIN_SOCKET_SECRET GPTRAIN_SOCKET_IFNAME  # each run below sets what it tests
scratch=$(mktemp -d)
declare -A pid   # NAME.TAG -> pid of `timeout 60 test_comm_socket ...` (or of a Python peer)
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
# expect_refusals NAME TAG N: that rank logged exactly N refused connections
expect_refusals() {
    local n
    n=$(grep -c "refused a connection from" "$scratch/$1.$2.err" || true)
    [ "$n" -eq "$3" ] || fail "$1: rank $2 logged $n refused connections, want $3: $(cat "$scratch/$1.$2.err")"
}
# passed NAME TAG: that rank exited 0 having printed PASS
passed() {
    finish "$1" "$2" 0
    grep -q "PASS$" "$scratch/$1.$2.out" || fail "$1: rank $2 did not print PASS"
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
    echo "ok $name: $world rank(s) over $method, every exchange checked ($(( $(now_ms) - t0 )) ms)"
}
# wait_for WHAT COMMAND...: polls up to 10 s until COMMAND succeeds
wait_for() {
    local what=$1 i
    shift
    for ((i = 0; i < 200; i++)); do "$@" && return 0; sleep 0.05; done
    fail "waited 10 s for $what"
}
# a port nobody listens on (bash's /dev/tcp connects if somebody does)
free_port() {
    local p
    for _ in 1 2 3 4 5 6 7 8; do
        p=$((20000 + RANDOM % 20001))
        (exec 3<> "/dev/tcp/127.0.0.1/$p") 2> /dev/null || break
    done
    echo "$p"
}
can_connect() { (exec 3<> "/dev/tcp/$1/$2") 2> /dev/null; }
# listening_on PORT: the local addresses of the TCP listeners on PORT, as ss shows them
have_ss=0
if command -v ss > /dev/null; then have_ss=1; fi
listening_on() { ss -ltnH "sport = :$1" | awk '{print $4}' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
listens_at() { [ "$(listening_on "$1")" = "$2" ]; }  # listens_at PORT ADDR: only ADDR listens on PORT
new_secret() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }

# A Python peer (a reference nobody here wrote for the MAC; see its modes)
cat > "$scratch/peer.py" <<'PEER'
import hashlib, hmac, os, socket, struct, sys, time
MAGIC, VERSION = 0x67707463, 3
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = sys.argv[4:]

def recv_n(s, n):  # up to n bytes, fewer when the other side closes
    got = b""
    try:
        while len(got) < n:
            k = s.recv(n - len(got))
            if not k:
                break
            got += k
    except OSError:
        pass
    return got

if mode == "impostor":  # ARGS: WORLD PORTFILE; says it is rank 0, accepts any proof, proves nothing
    srv = socket.socket()
    srv.bind((host, port))
    srv.listen()
    with open(args[1] + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.rename(args[1] + ".tmp", args[1])
    while True:
        conn, _ = srv.accept()
        conn.sendall(struct.pack("!IIii", MAGIC, VERSION, int(args[0]), 0) + os.urandom(32))
        if len(recv_n(conn, 48 + 32)) == 80:
            conn.sendall(struct.pack("!I", 0) + bytes(32))
        recv_n(conn, 1)
        conn.close()

s = socket.create_connection((host, port))
if mode == "silent":  # ARGS: SECONDS
    time.sleep(float(args[0]))
elif mode == "garbage":
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    recv_n(s, 1 << 16)
elif mode == "oldversion":  # a hello of protocol version 1
    s.sendall(struct.pack("!IIiiIHH", MAGIC, 1, 2, 1, 0, 0, 0))
    v = recv_n(s, 1 << 16)[48:]
    print(struct.unpack("!I", v[:4])[0] if len(v) >= 4 else "closed")
elif mode == "proof":  # ARGS: WORLD RANK; the key is GPTRAIN_SOCKET_SECRET, else a random one
    world, rank = int(args[0]), int(args[1])
    key = os.environ.get("GPTRAIN_SOCKET_SECRET", "").encode() or os.urandom(32)
    hello = struct.pack("!IIii", MAGIC, VERSION, world, rank) + os.urandom(32)
    s.sendall(hello)
    challenge = recv_n(s, 48)
    s.sendall(hmac.new(key, b"gptrain connector\0" + hello + challenge, hashlib.sha256).digest())
    v = recv_n(s, 36)
    print(struct.unpack("!I", v[:4])[0] if len(v) == 36 else "closed")
s.close()
PEER
peer() { "$PY" "$scratch/peer.py" "$@"; }
# peer_bg NAME MODE ARGS...: a Python peer in the background, its pid in pid[NAME]
peer_bg() {
    local name=$1
    shift
    "$PY" "$scratch/peer.py" "$@" &
    pid[$name]=$!
}

# SHA-256 and HMAC-SHA256: the standards' known answers, then 400 random cases from Python with
# messages and keys of every length around the block (64) and padding (56) edges and beyond
"$PY" - > "$scratch/sha_cases" <<'CASES'
import hashlib, hmac, random
r = random.Random(20240326)
for i in range(400):
    n = i if i < 200 else r.randrange(200, 5000)
    k = r.choice([0, 1, 16, 32, 55, 56, 63, 64, 65, 100, 128, 200, r.randrange(300)])
    m, key = r.randbytes(n), r.randbytes(k)
    print(key.hex() or "-", m.hex() or "-", hashlib.sha256(m).hexdigest(), hmac.new(key, m, hashlib.sha256).hexdigest())
CASES
"$bin" sha "$scratch/sha_cases" > "$scratch/sha.out" || fail "sha: $(tail -5 "$scratch/sha.out")"
echo "ok $(cat "$scratch/sha.out")"

for d in w1 fs2 fs4 stale alone0 alone1 bad die hang secret fsenv planted bind0 ifname stray; do
    mkdir "$scratch/$d"
done
run_world world1 1 fs "$scratch/w1"

# -pi fs without GPTRAIN_SOCKET_SECRET: rank 0's generated secret, born mode 0600 and this
# user's, 64 hex digits, present while rank 0 waits and gone (with the address) once all joined
start secret 0 0 2 fs "$scratch/secret" 20
wait_for "rank 0's secret file" test -s "$scratch/secret/gptrain_secret"
f=$scratch/secret/gptrain_secret
[ "$(stat -c %a "$f")" = 600 ] || fail "secret: the secret file has mode $(stat -c %a "$f"), want 600"
[ "$(stat -c %u "$f")" = "$(id -u)" ] || fail "secret: the secret file belongs to uid $(stat -c %u "$f")"
grep -qxE '[0-9a-f]{64}' "$f" || fail "secret: the secret file holds \"$(cat "$f")\", want 64 hex digits"
start secret 1 1 2 fs "$scratch/secret" 20
passed secret 0
passed secret 1
[ -z "$(ls -A "$scratch/secret")" ] || fail "secret: rank 0 left $(ls -A "$scratch/secret") behind"
echo "ok secret: -pi fs's secret file has mode 600, this user's, 64 hex digits; gone after the run"

run_world fs2 2 fs "$scratch/fs2"
[ ! -e "$scratch/fs2/gptrain_rendezvous" ] || fail "fs2: rank 0 left its rendezvous file behind"
echo "ok fs2: rank 0 removed its rendezvous file"
run_world fs4 4 fs "$scratch/fs4"

# -pi fs by default: rank 0 listens only on the address it advertises, the host's (so, when
# that is not loopback, 127.0.0.1 does not answer on its port). That address, if not loopback,
# is also the other address the checks below connect to.
start bind0 0 0 2 fs "$scratch/bind0" 20
wait_for "rank 0's address" test -s "$scratch/bind0/gptrain_rendezvous"
addr=$(cat "$scratch/bind0/gptrain_rendezvous")
host_ip=${addr%:*} p=${addr##*:}
[ "$have_ss" = 0 ] || [ "$(listening_on "$p")" = "$addr" ] ||
    fail "bind0: rank 0 advertises $addr but listens on $(listening_on "$p")"
if [[ $host_ip != 127.* ]]; then
    ! can_connect 127.0.0.1 "$p" || fail "bind0: rank 0 advertises $addr, yet 127.0.0.1:$p answers"
fi
start bind0 1 1 2 fs "$scratch/bind0" 20
passed bind0 0
passed bind0 1
echo "ok bind0: -pi fs: rank 0 listens on the address it advertises, $addr, only$([ "$have_ss" = 1 ] || echo ' (ss not found: unchecked)')"

# GPTRAIN_SOCKET_IFNAME=lo: rank 0 advertises and listens on 127.0.0.1 only, so the machine's
# other address does not answer on that port; then the world runs
GPTRAIN_SOCKET_IFNAME=lo start ifname 0 0 2 fs "$scratch/ifname" 20
wait_for "rank 0's address" test -s "$scratch/ifname/gptrain_rendezvous"
addr=$(cat "$scratch/ifname/gptrain_rendezvous")
p=${addr##*:}
[ "${addr%:*}" = 127.0.0.1 ] || fail "ifname: GPTRAIN_SOCKET_IFNAME=lo, yet rank 0 advertises $addr"
[ "$have_ss" = 0 ] || [ "$(listening_on "$p")" = "127.0.0.1:$p" ] ||
    fail "ifname: GPTRAIN_SOCKET_IFNAME=lo, yet rank 0 listens on $(listening_on "$p")"
what="not checked from another address (this machine has only loopback)"
if [[ $host_ip != 127.* ]]; then
    ! can_connect "$host_ip" "$p" || fail "ifname: GPTRAIN_SOCKET_IFNAME=lo, yet $host_ip:$p answers"
    what="$host_ip:$p refuses connections"
fi
GPTRAIN_SOCKET_IFNAME=lo start ifname 1 1 2 fs "$scratch/ifname" 20
passed ifname 0
passed ifname 1
echo "ok ifname: GPTRAIN_SOCKET_IFNAME=lo: rank 0 listens on 127.0.0.1:$p only$([ "$have_ss" = 1 ] && echo ' (ss)'); $what"
GPTRAIN_SOCKET_IFNAME=nosuch0 start ifname bad 1 2 fs "$scratch/ifname" 5
finish ifname bad 1
expect_err ifname bad "error: rank 1: GPTRAIN_SOCKET_IFNAME=nosuch0: no interface of that name has an IPv4 \
address (this machine has: lo 127.0.0.1"
echo "ok ifname: \"$(sed 's/^error: //' "$scratch/ifname.bad.err")\""

# tcp with a secret, at an address -ps names: rank 0 listens there only
secret=$(new_secret)
port=$(free_port)
ip=$host_ip
[[ $ip != 127.* ]] || ip=127.0.0.1
t0=$(now_ms)
GPTRAIN_SOCKET_SECRET=$secret start tcp3 0 0 3 tcp "$ip:$port" 20
[ "$have_ss" = 0 ] || wait_for "rank 0 to listen on $ip:$port" listens_at "$port" "$ip:$port"
for r in 1 2; do GPTRAIN_SOCKET_SECRET=$secret start tcp3 $r $r 3 tcp "$ip:$port" 20; done
for r in 0 1 2; do passed tcp3 $r; done
echo "ok tcp3: 3 ranks over tcp with GPTRAIN_SOCKET_SECRET, every exchange checked, rank 0 listening on $ip:$port \
only ($(( $(now_ms) - t0 )) ms)"

# tcp without a secret: refused at an address other machines reach; at 127.0.0.1 it runs, with
# a warning, and rank 0 listens on 127.0.0.1 only
port=$(free_port)
if [[ $host_ip != 127.* ]]; then
    start nosecret 0 0 2 tcp "$host_ip:$port" 5
    start nosecret 1 1 2 tcp "$host_ip:$port" 5
    finish nosecret 0 1
    finish nosecret 1 1
    expect_err nosecret 0 "error: rank 0: -pi tcp needs a job secret: set GPTRAIN_SOCKET_SECRET to the same value on every rank"
    expect_err nosecret 1 "error: rank 1: -pi tcp needs a job secret"
    echo "ok nosecret: -ps $host_ip:$port: \"$(sed 's/^error: //' "$scratch/nosecret.0.err")\""
fi
start nosecret 0 0 2 tcp "127.0.0.1:$port" 20
[ "$have_ss" = 0 ] || wait_for "rank 0 to listen on 127.0.0.1:$port" listens_at "$port" "127.0.0.1:$port"
start nosecret 1 1 2 tcp "127.0.0.1:$port" 20
passed nosecret 0
passed nosecret 1
expect_err nosecret 0 "warning: rank 0: -pi tcp without GPTRAIN_SOCKET_SECRET: listening on 127.0.0.1:$port only"
echo "ok nosecret: -ps 127.0.0.1 runs: \"$(cat "$scratch/nosecret.0.err")\""
GPTRAIN_SOCKET_SECRET=short start nosecret short 1 2 tcp "127.0.0.1:$port" 5
finish nosecret short 1
expect_err nosecret short "error: rank 1: GPTRAIN_SOCKET_SECRET has 5 characters, a secret needs 16 or more"

# another secret: a rank with a different GPTRAIN_SOCKET_SECRET is refused (and says why), so are
# Python peers proving with a random key, or with the right key from a world of 5; then the
# real ranks join and the job completes
secret=$(new_secret)
port=$(free_port)
GPTRAIN_SOCKET_SECRET=$secret start wrong 0 0 3 tcp "127.0.0.1:$port" 20
wait_for "rank 0 to listen" can_connect 127.0.0.1 "$port"
GPTRAIN_SOCKET_SECRET=${secret}x start wrong x 1 3 tcp "127.0.0.1:$port" 20
finish wrong x 1
expect_err wrong x "error: rank 1: rank 0 at 127.0.0.1:$port refused this rank's proof of the job secret: the \
ranks do not share one"
v=$(peer proof 127.0.0.1 "$port" 3 1)
[ "$v" = 2 ] || fail "wrong: a proof with a random key got verdict $v, want 2 (wrong proof)"
v=$(GPTRAIN_SOCKET_SECRET=$secret peer proof 127.0.0.1 "$port" 5 1)
[ "$v" = 3 ] || fail "wrong: Python's proof with the right key from a world of 5 got verdict $v, want 3 (world)"
for r in 1 2; do GPTRAIN_SOCKET_SECRET=$secret start wrong $r $r 3 tcp "127.0.0.1:$port" 20; done
for r in 0 1 2; do passed wrong $r; done
[ "$(grep -c "to its rendezvous port: wrong proof of the job secret" "$scratch/wrong.0.err")" = 2 ] ||
    fail "wrong: rank 0 did not log the two wrong proofs: $(cat "$scratch/wrong.0.err")"
expect_err wrong 0 "to its rendezvous port: it is rank 1 of a world of 5, this job has 3"
expect_refusals wrong 0 4  # and wait_for's probe, which connected and closed: "a port scan?"
echo "ok wrong: refused, and the job completed: \"$(sed 's/^error: //' "$scratch/wrong.x.err")\""
echo "ok wrong: $(head -1 "$scratch/wrong.0.err")"

# -pi fs with GPTRAIN_SOCKET_SECRET on rank 0 but not on rank 1: rank 1 finds no secret file
secret=$(new_secret)
GPTRAIN_SOCKET_SECRET=$secret start fsenv 0 0 2 fs "$scratch/fsenv" 20
start fsenv 1 1 2 fs "$scratch/fsenv" 20
finish fsenv 1 1
expect_err fsenv 1 "but there is no secret file: $scratch/fsenv/gptrain_secret: No such file or directory: set \
GPTRAIN_SOCKET_SECRET on every rank, or on none"
GPTRAIN_SOCKET_SECRET=$secret start fsenv 1b 1 2 fs "$scratch/fsenv" 20
passed fsenv 0
passed fsenv 1b
[ ! -e "$scratch/fsenv/gptrain_secret" ] || fail "fsenv: rank 0 wrote a secret file though it had GPTRAIN_SOCKET_SECRET"
echo "ok fsenv: \"$(sed 's/^error: //' "$scratch/fsenv.1.err")\""

# a fake rank 0 (Python) that accepts any proof but cannot prove itself; and a secret file that
# others may read, planted in the rendezvous directory
peer_bg impostor impostor 127.0.0.1 0 2 "$scratch/impostor.port"
wait_for "the impostor's port" test -s "$scratch/impostor.port"
ip_port=127.0.0.1:$(cat "$scratch/impostor.port")
GPTRAIN_SOCKET_SECRET=$(new_secret) start planted tcp 1 2 tcp "$ip_port" 20
finish planted tcp 1
expect_err planted tcp "error: rank 1: the process at $ip_port, which says it is rank 0, did not prove it knows \
the job secret: an impostor, or a rank with another secret; stopping"
echo "$ip_port" > "$scratch/planted/gptrain_rendezvous"
new_secret > "$scratch/planted/gptrain_secret"
chmod 644 "$scratch/planted/gptrain_secret"
start planted fs 1 2 fs "$scratch/planted" 20
finish planted fs 1
expect_err planted fs "error: rank 1: the secret file $scratch/planted/gptrain_secret has mode 0644"
kill "${pid[impostor]}"
unset "pid[impostor]"
echo "ok impostor: \"$(sed 's/^error: //' "$scratch/planted.tcp.err")\""
echo "ok planted: \"$(sed 's/^error: //' "$scratch/planted.fs.err" | cut -c1-120)...\""

# strays at rank 0's rendezvous port (handshake time: 12 s / 4 = 3 s): one silent past its 3 s,
# garbage, a port scan (bash connects and closes), a wrong proof, a version-1 hello; then a
# second silent one still connected when the ranks arrive. Rank 0 logs each and the job completes;
# the second silent one, still under way when every rank had joined, shows that it held up nobody.
start stray 0 0 3 fs "$scratch/stray" 12
wait_for "rank 0's address" test -s "$scratch/stray/gptrain_rendezvous"
addr=$(cat "$scratch/stray/gptrain_rendezvous")
ip=${addr%:*} p=${addr##*:}
t0=$(now_ms)
peer_bg stray.silent1 silent "$ip" "$p" 30
peer garbage "$ip" "$p"
(exec 3<> "/dev/tcp/$ip/$p")
v=$(peer proof "$ip" "$p" 3 1)
[ "$v" = 2 ] || fail "stray: a wrong proof got verdict $v, want 2"
v=$(peer oldversion "$ip" "$p")
[ "$v" = 1 ] || fail "stray: a version-1 hello got verdict $v, want 1"
while (( $(now_ms) - t0 < 3600 )); do sleep 0.1; done  # the first silent one is out
peer_bg stray.silent2 silent "$ip" "$p" 30
sleep 0.3
start stray 1 1 3 fs "$scratch/stray" 12
start stray 2 2 3 fs "$scratch/stray" 12
for r in 0 1 2; do passed stray $r; done
for why in "it sent nothing for 3 s" "not a gptrain rank (its first bytes are not gptrain's handshake)" \
           "it closed the connection without a word (a port scan?)" "wrong proof of the job secret" \
           "it speaks socket protocol version 1, this rank version 3" \
           "it had not proved itself when every rank had joined"; do
    expect_err stray 0 "to its rendezvous port: $why"
done
expect_refusals stray 0 6
for s in silent1 silent2; do kill "${pid[stray.$s]}"; unset "pid[stray.$s]"; done
echo "ok stray: rank 0 refused 6 strays and the job completed:"
sed 's/^/    /' "$scratch/stray.0.err"

# a stale file from a dead run: ranks 1, 2 start first, read it, are refused, and wait for rank 0's
echo "127.0.0.1:1" > "$scratch/stale/gptrain_rendezvous"
run_world stale 3 fs "$scratch/stale" late0

# nobody to meet: each rendezvous gives up after its 1 s timeout, naming what it waited on
port=$(free_port)
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

# handshake mistakes: a rank of another world size is refused (rank 0 logs it, the rank says
# why and stops) and the job goes on with the right one; one rank given twice stops the world
t0=$(now_ms)
start world 0 0 2 fs "$scratch/bad" 20
start world 1 1 3 fs "$scratch/bad" 20
finish world 1 1
expect_err world 1 "refused this rank: its world size is 2, this rank's 3; stopping"
start world 1b 1 2 fs "$scratch/bad" 20
passed world 0
passed world 1b
expect_err world 0 "to its rendezvous port: it is rank 1 of a world of 3, this job has 2"
start twice a 1 3 fs "$scratch/bad" 20
start twice b 1 3 fs "$scratch/bad" 20
start twice 0 0 3 fs "$scratch/bad" 20
finish twice 0 1
finish twice a 1
finish twice b 1
expect_err twice 0 "error: rank 1 connected twice"
(( $(now_ms) - t0 < 10000 )) || fail "handshake mistakes took $(( $(now_ms) - t0 )) ms (timeout is 20 s)"
echo "ok handshake: \"$(sed 's/^error: //' "$scratch/world.1.err")\""
echo "ok handshake: \"$(sed 's/^error: //' "$scratch/twice.0.err")\""

# rank 1 exits right after joining: rank 0 stops on its closed socket, rank 2 on rank 0's, long
# before the 20 s timeout
t0=$(now_ms)
for r in 0 1 2; do start die $r $r 3 fs "$scratch/die" 20 die; done
finish die 1 3
finish die 0 1
finish die 2 1
ms=$(( $(now_ms) - t0 ))
expect_err die 0 "error: rank 0: lost the connection to rank 1 ("
expect_err die 2 "error: rank 2: lost the connection to rank 0 ("
for r in 0 2; do expect_err die $r ": it exited or crashed; stopping"; done
(( ms < 10000 )) || fail "die: the others took $ms ms to stop (timeout is 20 s)"
echo "ok die: ranks 0 and 2 stopped in $ms ms: \"$(sed 's/^error: //' "$scratch/die.2.err")\""

# rank 1 hangs: rank 0, waiting on it, times out after 3 s; rank 2 waits on rank 0 and either
# sees it go or times out too
t0=$(now_ms)
for r in 0 1 2; do start hang $r $r 3 fs "$scratch/hang" 3 hang; done
finish hang 0 1
finish hang 2 1
ms=$(( $(now_ms) - t0 ))
kill -0 "${pid[hang.1]}" 2> /dev/null || fail "hang: rank 1 was supposed to be hanging, it exited"
kill "${pid[hang.1]}"
finish hang 1 143  # timeout passes the TERM on, then dies of it
expect_err hang 0 "error: rank 0: no data from rank 1 for 3 s: it hung or died; stopping"
grep -q -e "no data from rank 0" -e "lost the connection to rank 0" "$scratch/hang.2.err" ||
    fail "hang: rank 2: $(cat "$scratch/hang.2.err")"
(( ms >= 3000 && ms < 15000 )) || fail "hang: the others stopped after $ms ms (timeout 3 s)"
echo "ok hang: ranks 0 and 2 stopped in $ms ms: \"$(sed 's/^error: //' "$scratch/hang.2.err")\""
