#!/usr/bin/env bash
# Writes agent/link-order.txt: the functions drover-agent runs in its ordinary life, which
# the release link places side by side at the start of the program text (agent/build.rs:
# a linker script that collects their sections before .text). The kernel maps a program's code in 64 KiB runs around each
# page it touches, so code that runs scattered among code that never runs keeps almost the
# whole text resident; packed together it keeps only its own pages (docs/agent.md,
# "Memory").
#
# It runs the release agent under valgrind's callgrind (which records every function that
# runs) through: start, a first apply of a mixed bundle (Deployments, Services,
# ConfigMaps, a Namespace, and 520 ConfigMaps more, so LISTs come in pages) to the FAKE
# API server with fleet reports on and JSON logs (as deploy/ runs it), unchanged polls,
# a second bundle that changes and prunes, more polls, SIGTERM; then the same with a dir
# target. Bounded: each agent stops after at most ~6 minutes. The list is ordered by what ran
# first: the kube target's start, first apply and polls; its change and prune; the dir target.
#
#   cargo build --release -p drover-bundler -p drover-tests --bins
#   cargo build --release -p drover-agent   # alone, as deploy/Dockerfile builds it (or with the workspace)
#   bench/link-order.sh            # rewrites agent/link-order.txt
#   cargo build --release -p drover-agent   # relinks with the new order
#   bench/link-order.sh --check    # how many listed functions the binary has, and where
#   bench/link-order.sh --pattern FILE  # the pattern of each symbol in FILE (the one rule)
#
# The list holds patterns, not symbols: the crate disambiguators `Cs<base62>_` of a symbol
# name (and a legacy name's hash, `17h<16 hex>E`) depend on the build's settings and on the
# features cargo unified for the dependencies, so exact names matched only the build they
# came from and went stale with any change of it (2,333 of 3,500 in a workspace build).
# Without them the list applies to the agent built alone as it ships and built with the
# whole workspace (tests/run.sh), and survives changes that do not rename what runs.
# The workspace builds with v0 symbol names (.cargo/config.toml): they carry a generic
# function's type arguments, so a pattern names the one instance that ran; a legacy name
# carries only a hash, and its pattern matched every instance (2,676 patterns placed 6,123
# functions, and the idle RSS came back). It goes stale only as the code changes what it
# runs: `--check` says how much of the list matches; tests/tests/link_order.rs fails below
# 90%, or when a pattern is legacy or hashed.
#
# Needs: valgrind, docker-registry. Re-run it when the agent's code changed much: patterns
# that match nothing are skipped, new functions are placed after the listed ones.
set -euo pipefail
cd "$(dirname "$0")/.."
DROVER=$PWD/target/release/drover
AGENT=${AGENT:-$PWD/target/release/drover-agent}
# One reading of the binary's symbol table for both modes:
#   order check AGENT LIST                 the share of LIST the binary has, and whether it comes first
#   order write AGENT LIST CALLGRIND...    LIST := patterns of the binary's functions that ran, in
#                                          the order of the first CALLGRIND file that names them
order() {
  python3 - "$@" <<'PY'
import re, subprocess, sys
mode, agent, listing, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]

def pattern(sym):
    """A symbol without what depends on the build (agent/build.rs matches these): v0's crate
    disambiguators (`Cs<base62>_`), the crate a generic instance was made in (it ends the
    name after the type arguments' `E`), LTO's `.llvm.<n>` suffix, the `.<n>` that tells a
    function's local copies apart (their numbers shift with any change elsewhere: such a
    pattern places every copy); a legacy name's hash."""
    sym, llvm = re.subn(r"\.llvm\.[0-9]+$", "", sym)
    sym, local = (sym, 0) if llvm else re.subn(r"\.[0-9]+$", "", sym)
    suffix = ".llvm.*" if llvm else ".*" if local else ""
    if sym.startswith("_R"):
        sym = re.sub(r"Cs[0-9A-Za-z]+_", "Cs*_", sym)
        # A generic instance's name ends with the crate it was made in, `C[s*_]<n><n chars>`.
        for m in reversed(list(re.finditer(r"C(?:s\*_)?([0-9]+)", sym))):
            if m.start() > 2 and len(sym) - m.end() == int(m.group(1)):
                return sym[: m.start()] + "*" + suffix
        return sym + suffix
    return re.sub(r"17h[0-9a-f]{16}E$", "17h*E", sym) + suffix

def generic_legacy(p):
    """A legacy (hash-only) pattern of a Rust function: it matches every instance of a
    generic function, not only the one that ran (the build was not v0-mangled)."""
    return p.startswith("_ZN") and "17h*E" in p

if mode == "pattern":
    sys.stdout.write("".join(pattern(l.strip()) + "\n" for l in open(listing) if l.strip()))
    sys.exit(0)
text = {}  # function symbol -> (address, size)
for line in subprocess.run(["nm", "--defined-only", "-S", agent], capture_output=True, text=True).stdout.splitlines():
    f = line.split()
    if len(f) == 4 and f[2] in "tTwW":
        text[f[3]] = (int(f[0], 16), int(f[1], 16))
if not text:
    sys.exit(f"link order: {agent} has no symbol table; build it with the release profile of Cargo.toml (strip = \"debuginfo\")")
if mode == "check":
    listed = [l for l in open(listing).read().split() if not l.startswith("#")]
    by_pattern = {}
    for name, (addr, size) in text.items():
        by_pattern.setdefault(pattern(name), []).append((addr, size))
    hits = [by_pattern[p] for p in listed if p in by_pattern]
    found = [f for fs in hits for f in fs]
    sections = subprocess.run(["readelf", "-SW", agent], capture_output=True, text=True).stdout
    ordered = re.search(r"\.text\.ordered\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", sections)
    start, size = (int(ordered.group(1), 16), int(ordered.group(2), 16)) if ordered else (0, 0)
    inside = sum(1 for a, _ in found if start <= a < start + size)
    # Hand-written assembly (aws-lc's) has no section per function: a few stay in .text.
    packed = found and inside >= 0.95 * len(found)
    legacy = sum(1 for p in listed if generic_legacy(p))
    hashed = sum(1 for p in listed if pattern(p) != p)
    print(f"link order: {len(hits)} of {len(listed)} listed patterns match functions of the binary"
          + (f", {inside} of their {len(found)} functions placed together" if packed else ", NOT placed together (built without the order?)"))
    print(f"link order: they place {len(found)} functions, {sum(s for _, s in found) >> 10} KiB of code;"
          f" {legacy} legacy patterns (one per generic function, not per instance), {hashed} with a build hash")
    # Drop glue (`drop_in_place::<T>`) is made per build profile: a debug build has other
    # instances than the release build the list came from, so it says nothing of staleness.
    glue = lambda p: "drop_in_place" in p
    code = [p for p in listed if not glue(p)]
    code_hits = sum(1 for p in code if p in by_pattern)
    print(f"link-order-check listed={len(listed)} matched={len(hits)} placed={len(found)} legacy={legacy} hashed={hashed}"
          f" listed_code={len(code)} matched_code={code_hits}")
    sys.exit(0)
ran = {}  # function -> (the runs it ran in, the order it was first named in)
for i, run in enumerate(runs):
    for line in open(run):
        if line.startswith(("fn=", "cfn=")):
            name = line.split("=", 1)[1].strip()
            if name in text:
                ran.setdefault(name, (set(), len(ran)))[0].add(i)
# In the order of the runs a function first ran in: the kube target's start, first apply
# and polls; then what only its change and prune ran; then the dir target's. An agent that
# never changes its bundle, or runs the other target, touches little of what comes later.
order_key = lambda name: (min(ran[name][0]), ran[name][1])
patterns = list(dict.fromkeys(pattern(name) for name in sorted(ran, key=order_key)))
open(listing, "w").write("".join(f"{p}\n" for p in patterns))
code = sum(text[name][1] for name in ran) >> 10
print(f"wrote {listing}: {len(ran)} functions ran, {code} KiB of code, of {len(text)} functions and "
      f"{sum(size for _, size in text.values()) >> 10} KiB in the text")
PY
}
if [[ ${1:-} == --pattern ]]; then   # the symbols of file $2 (one a line), their patterns on stdout (the rule, for tests)
  order pattern - "$2"
  exit 0
fi
if [[ ${1:-} == --check ]]; then
  order check "$AGENT" agent/link-order.txt
  exit 0
fi
FAKE=$PWD/target/release/fake-apiserver
OUT=$PWD/agent/link-order.txt
WORK=$(mktemp -d)
source bench/lib.sh
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; stop_registries; rm -rf "$WORK"; }
trap cleanup EXIT
order check "$AGENT" /dev/null >/dev/null   # fails now, not after the runs, if the binary has no symbol table

start_registry
REF="$REG/fleet/order:prod"
bundle() { # DIR N: a mixed bundle of N objects
  python3 - "$1" "$2" <<'PY'
import os, sys
out, n = sys.argv[1], int(sys.argv[2])
os.makedirs(out, exist_ok=True)
docs = ["apiVersion: v1\nkind: Namespace\nmetadata: {name: order}\n"]
for i in range(n):
    k = i % 3
    if k == 0:
        docs.append(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: app-{i}, namespace: order, labels: {{app: app-{i}}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: app-{i}}}}}
  template:
    metadata: {{labels: {{app: app-{i}}}}}
    spec:
      containers:
      - name: main
        image: registry.example/app:{i}
        resources: {{requests: {{cpu: 100m, memory: 128Mi}}}}
""")
    elif k == 1:
        docs.append(f"apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{i}, namespace: order}}\nspec:\n  selector: {{app: app-{i}}}\n  ports: [{{port: 80, targetPort: 8080}}]\n")
    else:
        docs.append(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg-{i}, namespace: order}}\ndata:\n  index: \"{i}\"\n")
open(os.path.join(out, "all.yaml"), "w").write("---\n".join(docs))
PY
}
bundle "$WORK/in1" 60
# More than 500 ConfigMaps in one namespace: the LISTs of a resync come in pages.
python3 - "$WORK/in1/many.yaml" <<'PY'
import sys
open(sys.argv[1], "w").write("".join(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: many-{i}, namespace: order}}\ndata:\n  index: \"{i}\"\n" for i in range(520)))
PY
bundle "$WORK/in2" 45   # fewer objects: the second bundle changes nothing it keeps and prunes the rest
cp "$WORK/in1/many.yaml" "$WORK/in2/"
sed -i 's/index: "3"/index: "changed"/' "$WORK/in2/all.yaml"
DROVER_KEY_PASSWORD= "$DROVER" keygen --out-dir "$WORK/keys" >/dev/null 2>&1
push() { DROVER_KEY_PASSWORD= "$DROVER" push "$1" "$REF" --plain-http --sequence "$2" --cluster-type order \
  --environment prod --key "$WORK/keys/drover.key" >/dev/null 2>&1; }
push "$WORK/in1" 1

"$FAKE" --kubeconfig-out "$WORK/kc" >"$WORK/fake.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q ready "$WORK/fake.out" 2>/dev/null && break; sleep 0.05; done
URL=$(grep -o 'server: .*' "$WORK/kc" | cut -d' ' -f2)
curl -fs -X POST "$URL/api/v1/namespaces" -H 'Content-Type: application/json' \
  -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"drover-system"}}' >/dev/null

profile() { # LABEL TARGET-ARGS...: one agent under callgrind through both bundles
  local label=$1; shift
  local listen="127.0.0.1:$(free_port)"
  push "$WORK/in1" "$SEQ"; SEQ=$((SEQ + 1))
  KUBECONFIG=$WORK/kc valgrind --tool=callgrind --demangle=no --compress-strings=no --compress-pos=no \
    --callgrind-out-file="$WORK/cg-$label" "$AGENT" run --source "$REF" --plain-http \
    --trust-key "$WORK/keys/drover.pub" --state-dir "$WORK/state-$label" --listen "$listen" --interval 1s \
    --cluster-name "order-$label" --expect-cluster-type order --expect-environment prod --report-interval 2s \
    --log-format json "$@" 2>"$WORK/agent-$label.log" &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 3000); do curl -fs "http://$listen/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -fs "http://$listen/readyz" >/dev/null || { echo "$label: the agent never became ready"; grep -v "^==" "$WORK/agent-$label.log" | tail -5; exit 1; }
  curl -fs "http://$listen/metrics" >/dev/null; curl -fs "http://$listen/status" >/dev/null || true
  sleep 8
  # What ran so far (start, first apply, unchanged polls) apart from what only a change runs.
  callgrind_control --dump=start-apply-polls "$pid" >/dev/null 2>&1
  push "$WORK/in2" "$SEQ"; SEQ=$((SEQ + 1))
  for _ in $(seq 600); do grep -q '"sequence":'$((SEQ - 1)) "$WORK/agent-$label.log" && break; sleep 0.1; done
  sleep 8
  kill -TERM "$pid"
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  wait "$pid" || true
}
SEQ=2
profile kube --target kube
profile dir --target "dir:$WORK/out"

order write "$AGENT" "$OUT" "$WORK/cg-kube.1" "$WORK/cg-kube" "$WORK/cg-dir.1" "$WORK/cg-dir"
