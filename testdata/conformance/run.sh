#!/usr/bin/env bash
# Conformance run of the agentprotocol.ai v1 API (/ap/v1/agent/tasks): builds
# ./cmd/bridge, starts `bridge demo` on free loopback ports, and runs our
# Postman collection (agent_protocol_v1.postman.json) against it with newman,
# the way the official suite is run (a test_output.txt holding "Washington"
# in the working directory, the base URL in the `url` variable).
#
# Exits non-zero when the build, the start or any newman assertion fails; the
# bridge is always stopped. Needs go, node and npm; newman is taken from PATH,
# else installed (once) with npm into $NEWMAN_PREFIX (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/agentbridge/newman). Only the npm registry is
# contacted, and only for that install.
#
# Environment: BRIDGE_BIN uses a prebuilt binary instead of building one;
# NEWMAN_PREFIX as above; KEEP_LOG=1 prints the bridge's log even on success.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
collection="$here/agent_protocol_v1.postman.json"

work=$(mktemp -d "${TMPDIR:-/tmp}/apv1-conformance.XXXXXX")
bridge_pid=""
cleanup() {
  local rc=$?
  if [ -n "$bridge_pid" ] && kill -0 "$bridge_pid" 2>/dev/null; then
    kill "$bridge_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$bridge_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$bridge_pid" 2>/dev/null || true
    wait "$bridge_pid" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ] || [ "${KEEP_LOG:-}" = 1 ]; then
    [ -s "$work/bridge.log" ] && { echo "-- bridge log (tail)"; tail -n 40 "$work/bridge.log"; }
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# newman: from PATH, else an npm install into a cache directory.
newman_bin=$(command -v newman || true)
if [ -z "$newman_bin" ]; then
  prefix=${NEWMAN_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/agentbridge/newman}
  newman_bin="$prefix/node_modules/.bin/newman"
  if [ ! -x "$newman_bin" ]; then
    echo "== installing newman@6 into $prefix"
    mkdir -p "$prefix"
    npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$prefix" newman@6 >&2
  fi
fi
"$newman_bin" --version >/dev/null

# The bridge.
if [ -n "${BRIDGE_BIN:-}" ]; then
  bin=$BRIDGE_BIN
else
  echo "== go build ./cmd/bridge"
  bin="$work/bridge"
  (cd "$root" && go build -o "$bin" ./cmd/bridge)
fi

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# Start `bridge demo`; a port taken between the probe and the bind gets
# another try.
base=""
for attempt in 1 2 3; do
  port=$(free_port)
  args=(demo --listen "127.0.0.1:$port" --agent-listen "127.0.0.1:$(free_port)")
  # Newer demos run more reference agents, each with its own flag.
  help=$("$bin" demo --help 2>&1 || true)
  for flag in $(printf '%s\n' "$help" | grep -o -- '--[a-z-]*-agent-listen' | sort -u); do
    args+=("$flag" "127.0.0.1:$(free_port)")
  done
  "$bin" "${args[@]}" >"$work/bridge.log" 2>&1 &
  bridge_pid=$!
  for _ in $(seq 100); do
    if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      base="http://127.0.0.1:$port"
      break
    fi
    kill -0 "$bridge_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$base" ] && break
  kill "$bridge_pid" 2>/dev/null || true
  wait "$bridge_pid" 2>/dev/null || true
  bridge_pid=""
  echo "bridge demo did not start (attempt $attempt):" >&2
  tail -n 5 "$work/bridge.log" >&2 || true
done
if [ -z "$base" ]; then
  echo "FAIL: bridge demo did not start" >&2
  exit 1
fi
echo "== bridge demo on $base"

# The file the Artifacts folder uploads, as the official test.sh writes it.
echo "Washington" >"$work/test_output.txt"

echo "== newman run $(basename "$collection")"
cd "$work"
"$newman_bin" run "$collection" \
  --env-var "url=$base" \
  --working-dir "$work" \
  --timeout-request 30000 \
  --color off \
  --reporters cli
echo "conformance passed"
