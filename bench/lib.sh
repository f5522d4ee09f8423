# Shared by the bench scripts: `source bench/lib.sh` after setting WORK, and call
# stop_registries from the EXIT trap. Only loopback addresses.

REG_PIDS=()

# A free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts a fresh docker-registry (new port, new storage under $WORK) and waits until it
# answers. Sets REG=127.0.0.1:PORT and REG_PID. Call it directly, not in $(...): the
# PID must reach this shell so that stop_registries can stop it.
start_registry() {
  local port; port=$(free_port)
  local dir="$WORK/reg-$port"; mkdir -p "$dir/storage"
  # As Debian ships it (/etc/docker/registry/config.yml), with the in-memory blob
  # descriptor cache, but quiet: no access log, errors only.
  printf 'version: 0.1\nlog: {level: error, accesslog: {disabled: true}}\nstorage: {cache: {blobdescriptor: inmemory}, filesystem: {rootdirectory: %s/storage}}\nhttp: {addr: 127.0.0.1:%s}\n' "$dir" "$port" > "$dir/config.yml"
  docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
  REG_PID=$!
  REG_PIDS+=("$REG_PID")
  for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break; sleep 0.05; done
  REG="127.0.0.1:$port"
}

# Stops the registry started last.
stop_registry() { kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; }

# Stops every registry started here.
stop_registries() { for p in "${REG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
