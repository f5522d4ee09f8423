# Shared by the bench scripts: `source bench/lib.sh` after setting WORK, and call
# stop_registries from the EXIT trap. Only loopback addresses.

REG_PIDS=()

# A free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts a fresh docker-registry (new port, new storage under $WORK) and waits until it
# answers. Sets REG=127.0.0.1:PORT, REG_PID and REG_LOG (its log file; with
# REG_ACCESSLOG=1 it holds one access-log line per request). Call it directly, not in
# $(...): the PID must reach this shell so that stop_registries can stop it.
start_registry() {
  command -v docker-registry >/dev/null || { echo "docker-registry not found: install Debian's docker-registry (tests/run.sh does)" >&2; exit 1; }
  local port; port=$(free_port)
  local dir="$WORK/reg-$port"; mkdir -p "$dir/storage"
  # As Debian ships it (/etc/docker/registry/config.yml), with the in-memory blob
  # descriptor cache, but quiet: errors only, and no access log unless REG_ACCESSLOG=1.
  local access=true; [[ -n ${REG_ACCESSLOG:-} ]] && access=false
  printf 'version: 0.1\nlog: {level: error, accesslog: {disabled: %s}}\nstorage: {cache: {blobdescriptor: inmemory}, filesystem: {rootdirectory: %s/storage}}\nhttp: {addr: 127.0.0.1:%s}\n' "$access" "$dir" "$port" > "$dir/config.yml"
  REG_LOG="$dir/log"
  docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
  REG_PID=$!
  REG_PIDS+=("$REG_PID")
  for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break; sleep 0.05; done
  curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 || { echo "the registry on port $port never answered:" >&2; tail -5 "$dir/log" >&2; exit 1; }
  REG="127.0.0.1:$port"
}

# Stops the registry started last.
stop_registry() { kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; }

# Stops every registry started here.
stop_registries() { for p in "${REG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }

# Request counts of a registry access log (REG_ACCESSLOG=1) from byte offset $2 on:
# "N requests: X HEAD, Y GET manifest, Z GET blob (K KiB), O other GET, W writes".
count_requests() {
  tail -c +"$(( ${2:-0} + 1 ))" "$1" | python3 -c '
import re, sys
head = getm = getb = kib = geto = writes = 0
for line in sys.stdin:
    m = re.search(r"\"(HEAD|GET|PUT|POST|PATCH|DELETE) (\S+) HTTP/[^\"]*\" (\d+) (\d+|-)", line)
    if not m:
        continue
    meth, path, size = m.group(1), m.group(2), m.group(4)
    if meth == "HEAD":
        head += 1
    elif meth == "GET" and "/manifests/" in path:
        getm += 1
    elif meth == "GET" and "/blobs/" in path:
        getb += 1
        kib += 0 if size == "-" else int(size)
    elif meth == "GET":
        geto += 1
    else:
        writes += 1
total = head + getm + getb + geto + writes
print(f"{total} requests: {head} HEAD, {getm} GET manifest, {getb} GET blob ({kib // 1024} KiB), {geto} other GET, {writes} writes")
'
}
