#!/usr/bin/env bash
# Soak (issue 14): one long-running drover-agent, kube target on the FAKE API server
# (tests/src/fakekube), follows N successive signed bundles (default 1,000) pushed with
# `drover push` to its own docker-registry on a loopback port. Between two bundles objects
# are added, changed and removed, and the agent resyncs the applied bundle at least once
# (--resync 0s: every poll that finds no new digest re-applies the applied one).
#
# Prints, at updates 10, 100 and N (and every REPORT_EVERY updates): the agent's RSS
# (VmRSS) and peak (VmHWM), the size of its sled directory (STATE/db, bytes and disk
# usage), the history length (/history), and the applies, resyncs and pushes so far.
# Goals: RSS at N within 1 MiB of RSS at 100; sled size bounded (the cache keeps the
# applied bundle only once a newer one is applied); history capped at 100. At the end it
# checks that the fake API server holds exactly bundle N (nothing left behind, nothing
# pruned too early) and that the agent stops with exit 0 on SIGTERM.
#
# Usage: bench/soak.sh [N]                   release build (SKIP_BUILD=1 to skip building)
#        SOAK_TIMEOUT=3600 bench/soak.sh 1000   whole-run bound in seconds (default 2 h);
#                                               each update is bounded to 60 s
#        REPORT_EVERY=100 (default)            extra report lines
#        PROFILE=debug SKIP_BUILD=1 bench/soak.sh 30   a quick check of the script itself
# Exit 1 when an update is not applied in time, the agent dies, or a goal is missed.
#        KEY=cosign                            sign with a `drover keygen` key (slower pushes)
# Needs: docker-registry, curl, python3, openssl. Only loopback addresses; stops everything on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
TIMEOUT=${SOAK_TIMEOUT:-7200}
REPORT_EVERY=${REPORT_EVERY:-100}
PROFILE=${PROFILE:-release}
[[ -n ${SKIP_BUILD:-} ]] || { cargo build --release -p drover-bundler -p drover-tests --bins --quiet && cargo build --release -p drover-agent --quiet; }
BIN=$PWD/target/$PROFILE
WORK=$(mktemp -d)
source bench/lib.sh
AGENT_PID="" FAKE_PID=""
# The registry's storage on tmpfs when there is one: `drover push` spends ~0.05 s of CPU,
# the rest of its time waits for the registry's ~25 sequential writes, which tmpfs makes
# about twice as fast. The agent's state directory stays on disk (it is what is measured).
REG_WORK=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
cleanup() {
  [[ -n $AGENT_PID ]] && kill "$AGENT_PID" 2>/dev/null
  [[ -n $FAKE_PID ]] && kill "$FAKE_PID" 2>/dev/null
  stop_registries
  rm -rf "$WORK" "$REG_WORK"
}
trap cleanup EXIT
START=$(date +%s)
fail() { echo "FAIL: $*" >&2; echo "--- agent log (last 30 lines) ---" >&2; tail -30 "$WORK/agent.log" >&2 || true; exit 1; }

WORK=$REG_WORK start_registry
REF="$REG/fleet/soak:prod"
# The signing key: a plain PKCS#8 P-256 key (`drover push --key` reads it as it reads a
# cosign key) instead of `drover keygen`'s scrypt-encrypted one, whose decryption on every
# push would be most of the push time. KEY=cosign uses `drover keygen`.
mkdir -p "$WORK/keys"
if [[ ${KEY:-pkcs8} == cosign ]]; then
  DROVER_KEY_PASSWORD= "$BIN/drover" keygen --out-dir "$WORK/keys" >/dev/null 2>&1
else
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/keys/drover.key" 2>/dev/null
  openssl pkey -in "$WORK/keys/drover.key" -pubout -out "$WORK/keys/drover.pub"
fi

"$BIN/fake-apiserver" --kubeconfig-out "$WORK/kubeconfig" >"$WORK/fake.out" 2>"$WORK/fake.err" &
FAKE_PID=$!
for _ in $(seq 100); do grep -q ready "$WORK/fake.out" 2>/dev/null && break; sleep 0.05; done
API=$(grep -o 'server: .*' "$WORK/kubeconfig" | cut -d' ' -f2)
# The agent's namespace, where its state ConfigMap lives (deploy/kubernetes creates it).
curl -fsS -X POST "$API/api/v1/namespaces" -H 'Content-Type: application/json' \
  -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"drover-system"}}' >/dev/null

# Bundle k: a Namespace, 20 ConfigMaps whose data changes with k, and a window of 10
# ConfigMaps roll-k .. roll-(k+9): each update adds one and removes one (pruned), and a
# Secret every 7th update (added, then removed by the next).
PAD=$(printf 'x%.0s' $(seq 1 150))
bundle() {
  local k=$1 dir=$WORK/in
  rm -rf "$dir"; mkdir -p "$dir"
  {
    printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: soak\n'
    for i in $(seq 0 19); do
      printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base-%02d\n  namespace: soak\ndata:\n  update: "%d"\n  payload: "%s"\n' "$i" "$k" "${PAD:0:$((100 + (k + i) % 50))}"
    done
    for j in $(seq "$k" $((k + 9))); do
      printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: roll-%d\n  namespace: soak\ndata:\n  born: "%d"\n' "$j" "$j"
    done
    if ((k % 7 == 0)); then
      printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: every-7th\n  namespace: soak\nstringData:\n  k: "%d"\n' "$k"
    fi
  } >"$dir/all.yaml"
}
PUSH_MS=0
push() {
  local k=$1 t0 t1
  bundle "$k"
  t0=$(date +%s%N)
  DROVER_KEY_PASSWORD= "$BIN/drover" push "$WORK/in" "$REF" --plain-http --sequence "$k" --cluster-type soak \
    --environment prod --key "$WORK/keys/drover.key" >/dev/null 2>"$WORK/push.err" || { cat "$WORK/push.err"; fail "push $k"; }
  t1=$(date +%s%N)
  PUSH_MS=$((PUSH_MS + (t1 - t0) / 1000000))
}

push 1
LISTEN="127.0.0.1:$(free_port)"
KUBECONFIG=$WORK/kubeconfig "$BIN/drover-agent" run --source "$REF" --plain-http --trust-key "$WORK/keys/drover.pub" \
  --expect-cluster-type soak --expect-environment prod --target kube --state-dir "$WORK/state" --listen "$LISTEN" \
  --interval 100ms --resync 0s --health-timeout 10s 2>"$WORK/agent.log" &
AGENT_PID=$!

status() { curl -fsS "http://$LISTEN/status" 2>/dev/null || true; }
applied_seq() { status | grep -o '"appliedSequence":[0-9]*' | cut -d: -f2; }
polls_applied() { curl -fsS "http://$LISTEN/metrics" 2>/dev/null | awk '/^drover_polls_total\{result="Applied"\}/ {print $2}'; }
kib() { awk -v k="$1" '$1==k":" {print $2}' "/proc/$AGENT_PID/status"; }
history_len() { curl -fsS "http://$LISTEN/history?limit=100000" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
# Waits until the agent has applied sequence $1 and resynced it once (one more Applied poll).
wait_update() {
  local k=$1 deadline=$(($(date +%s) + 60)) before=""
  while :; do
    kill -0 "$AGENT_PID" 2>/dev/null || fail "the agent exited at update $k"
    (($(date +%s) > deadline)) && fail "update $k not applied and resynced within 60 s; status: $(status)"
    (($(date +%s) - START > TIMEOUT)) && fail "SOAK_TIMEOUT ($TIMEOUT s) reached at update $k"
    if [[ -z $before ]]; then
      [[ $(applied_seq) == "$k" ]] && before=$(polls_applied)
    else
      local now; now=$(polls_applied)
      [[ -n $now && ${now%.*} -gt ${before%.*} ]] && return 0
    fi
    sleep 0.02
  done
}

declare -A RSS HIST
report() {
  local k=$1 rss hwm bytes du hist
  rss=$(kib VmRSS); hwm=$(kib VmHWM)
  bytes=$(du -sb "$WORK/state/db" | cut -f1); du=$(du -sk "$WORK/state/db" | cut -f1)
  hist=$(history_len)
  RSS[$k]=$rss; HIST[$k]=$hist
  printf '%6d  %7.2f  %7.2f  %10d  %8d  %7d  %6ds\n' "$k" "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" \
    "$bytes" "$du" "$hist" "$(($(date +%s) - START))"
  SLED[$k]=$bytes
}
declare -A SLED
echo "soak: $N updates, kube target on the fake API server, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%6s  %7s  %7s  %10s  %8s  %7s  %7s\n' update "RSS MiB" "HWM MiB" "sled bytes" "sled KiB" history elapsed
wait_update 1
for k in $(seq 2 "$N"); do
  push "$k"
  wait_update "$k"
  if ((k == 10 || k == 100 || k == N || k % REPORT_EVERY == 0)); then report "$k"; fi
done
resyncs=$(curl -fsS "http://$LISTEN/metrics" | awk '/^drover_polls_total\{result="Applied"\}/ {print $2}')
pruned=$(curl -fsS "http://$LISTEN/metrics" | awk '/^drover_prunes_total / {print $2}')
echo "updates $N, Applied polls ${resyncs%.*} (updates + resyncs), objects pruned ${pruned%.*}, drover push mean $((PUSH_MS / N)) ms, total $(($(date +%s) - START)) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
# The cluster holds exactly bundle N: its 30 ConfigMaps with N's data (and the Secret on
# a 7th update), nothing pruned too early or left behind.
curl -fsS "$API/api/v1/namespaces/soak/configmaps" >"$WORK/cms.json"
curl -fsS "$API/api/v1/namespaces/soak/secrets" >"$WORK/secrets.json"
python3 - "$N" "$WORK/cms.json" "$WORK/secrets.json" <<'PY' || fail "the cluster does not hold bundle $N"
import json, sys
n = int(sys.argv[1])
cms = {o["metadata"]["name"]: o.get("data", {}) for o in json.load(open(sys.argv[2]))["items"]}
want = {f"base-{i:02d}" for i in range(20)} | {f"roll-{j}" for j in range(n, n + 10)}
assert set(cms) == want, f"ConfigMaps: missing {sorted(want - set(cms))}, left behind {sorted(set(cms) - want)}"
assert all(cms[f"base-{i:02d}"]["update"] == str(n) for i in range(20)), "base ConfigMaps not at update %d" % n
secrets = {o["metadata"]["name"] for o in json.load(open(sys.argv[3]))["items"]}
assert ("every-7th" in secrets) == (n % 7 == 0), f"Secrets: {sorted(secrets)}"
print(f"cluster holds bundle {n}: {len(cms)} ConfigMaps" + (", the Secret" if n % 7 == 0 else ""))
PY
kill -TERM "$AGENT_PID"; wait "$AGENT_PID" || fail "agent exit code $? on SIGTERM"; AGENT_PID=""

# Goals.
ok=1
if ((N >= 100)); then
  d=$((RSS[$N] - RSS[100]))
  printf 'RSS at %d minus RSS at 100: %+d KiB (goal within 1024 KiB)\n' "$N" "$d"
  ((d > 1024 || d < -1024)) && ok=0
  printf 'sled directory at %d: %d bytes, at 100: %d bytes\n' "$N" "${SLED[$N]}" "${SLED[100]}"
  ((SLED[$N] > 2 * SLED[100] + 1048576)) && { echo "sled directory grows"; ok=0; }
fi
printf 'history at %d: %d entries (goal: at most 100)\n' "$N" "${HIST[$N]}"
((HIST[$N] > 100)) && ok=0
((ok)) || { echo "FAIL: a goal was missed"; exit 1; }
echo "ok"
