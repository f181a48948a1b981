#!/usr/bin/env bash
# The check before a deployment: build the worker's image from this checkout
# (Containerfile), run it as a client would use it, and play the pod spec of
# `manage.py waker export-kubernetes` with `podman kube play`. A local check
# of the image and the pod spec, not a cluster (docs/guides/SCALING.md says
# what it proves and what it does not).
#
# Usage: scripts/container-check.sh   (as root, or: sudo scripts/container-check.sh)
#
# On Debian, with the package index reachable; a container registry is not
# needed: when the Containerfile's base image cannot be pulled, it is made
# with debootstrap from the host's apt sources (with the host's extra CA
# certificates) and imported under the FROM name.
#   install   podman, runc, debootstrap and what they need, when missing
#   config    a containers.conf of the check's own (runc, file events,
#             ulimits within the machine's hard limits), never the machine's
#   base      the FROM image: present, pulled, or made with debootstrap
#   runtime   a container starts with that configuration
#   build     podman build --format docker (the OCI format drops HEALTHCHECK)
#   run       the image with a store volume, read-only, no capabilities, on a
#             PENELOPE_PORT that is not 5000; podman healthcheck run healthy
#   calls     a plugin call, a polling job with a file, a webhook job to a
#             receiver on the host, a long job left running
#   restart   podman restart: the same key, the held result and its file,
#             the running job interrupted
#   security  every process uid 10001, no capabilities, root file system read-only
#   export    export-kubernetes for one persona, converted to kinds podman runs
#   kube      podman kube play: the pod runs, its security context is in
#             force, it answers a call with the key from its Secret
#   cleanup   every container, pod, volume and secret made here is removed;
#             the images stay, so a later run reuses their layers
# Each step prints its time; a failure names the step and shows the log of
# the containers it made. PENELOPE_CHECK_DIR (default
# /var/tmp/penelope-container-check) holds the configuration and the logs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${PENELOPE_CHECK_DIR:-/var/tmp/penelope-container-check}
IMAGE=localhost/penelope:check
RUN=penelope-check-run           # the container of the run steps, and its volume's prefix
PERSONA=kube_check               # the exported persona: resources penelope-kube-check
WORKER_PORT=5081                 # not the image's 5000: the health check must follow PENELOPE_PORT
PACKAGES=(podman runc debootstrap netavark aardvark-dns iptables catatonit python3 ca-certificates)
CLIENT=(python3 "$ROOT/scripts/container/check_client.py")

STEP=start
STARTED=$(date +%s%N)
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
seconds() { printf '%d.%01d s' $(( $1 / 1000 )) $(( $1 % 1000 / 100 )); }
say() { echo "  $*"; }
step() {
  STEP=$1
  shift
  local began
  began=$(date +%s%N)
  echo "== $STEP"
  "$@"
  echo "== $STEP: ok ($(seconds "$(ms_since "$began")"))"
}

# --- what is made here, and its removal --------------------------------------

made_containers() { podman ps -a --format '{{.Names}}' 2>/dev/null | grep -E "^($RUN|penelope-kube-check-pod.*)$" || true; }
made_pods() { podman pod ps --format '{{.Name}}' 2>/dev/null | grep -E '^penelope-kube-check-pod' || true; }
made_volumes() { podman volume ls --format '{{.Name}}' 2>/dev/null | grep -E "^($RUN-store|store-penelope-kube-check-0|penelope-kube-check-.*)$" || true; }
made_secrets() { podman secret ls --format '{{.Name}}' 2>/dev/null | grep -E '^penelope-kube-check$' || true; }

remove_made() {
  local pod container volume secret
  for pod in $(made_pods); do podman pod rm -f -t 10 "$pod" >/dev/null 2>&1 || true; done
  for container in $(made_containers); do podman rm -f -t 10 "$container" >/dev/null 2>&1 || true; done
  for volume in $(made_volumes); do podman volume rm -f "$volume" >/dev/null 2>&1 || true; done
  for secret in $(made_secrets); do podman secret rm "$secret" >/dev/null 2>&1 || true; done
  [ -n "${RECEIVER_PID:-}" ] && kill "$RECEIVER_PID" 2>/dev/null || true
  rm -rf "$WORK/rootfs" "$WORK/base.tar" "$WORK/kube"
}

on_exit() {
  local status=$?
  set +e
  if [ "$status" != 0 ]; then
    echo "== $STEP: FAILED (exit $status, $(seconds "$(ms_since "$STARTED")") into the check)"
    if command -v podman >/dev/null; then
      local container
      for container in $(made_containers); do
        echo "---- podman logs --tail 80 $container"
        podman logs --tail 80 "$container" 2>&1 || true
      done
    fi
    for log in "$WORK"/*.log; do
      [ -s "$log" ] || continue
      echo "---- tail -25 $log"
      grep -v 'unable to get systemd connection' "$log" | tail -25
    done
  fi
  if command -v podman >/dev/null && [ -n "${CONTAINERS_CONF:-}" ]; then
    STEP=cleanup
    remove_made
    local left
    left="$(made_containers)$(made_pods)$(made_volumes)$(made_secrets)"
    if [ -n "$left" ]; then echo "== cleanup: left behind: $left"; status=1; fi
  fi
  [ "$status" = 0 ] && echo "== container check passed in $(seconds "$(ms_since "$STARTED")")"
  exit "$status"
}
trap on_exit EXIT

# --- install, config ---------------------------------------------------------

install() {
  if [ "$(id -u)" != 0 ]; then
    echo "container-check: run as root (sudo $0): it installs packages and runs rootful podman" >&2
    return 1
  fi
  local missing=() package
  for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if [ ${#missing[@]} = 0 ]; then
    say "installed already: ${PACKAGES[*]}"
  else
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$WORK/install.log" 2>&1
  fi
  say "$(podman --version), $(runc --version | head -1)"
}

config() {
  # Ulimits a container may be given: the machine's hard limits, and no more
  # processes than pid_max (raising RLIMIT_NPROC past it was refused here).
  local nofile nproc pid_max cgroups
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
  nproc=$(ulimit -Hu); pid_max=$(cat /proc/sys/kernel/pid_max)
  if [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; then nproc=$pid_max; fi
  # Without systemd as init, podman keeps its cgroups itself.
  cgroups=cgroupfs; [ -d /run/systemd/system ] && cgroups=systemd
  cat >"$WORK/containers.conf" <<EOF
# scripts/container-check.sh's own configuration (CONTAINERS_CONF): the
# machine's containers.conf files are not read.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
# crun refuses a hybrid cgroup layout (v1 controllers with a v2 mount).
runtime = "runc"
cgroup_manager = "$cgroups"
events_logger = "file"

[network]
network_backend = "netavark"
EOF
  export CONTAINERS_CONF="$WORK/containers.conf"
  say "$CONTAINERS_CONF: runc, cgroup manager $cgroups, ulimits nofile $nofile, nproc $nproc"
}

# --- the base image ----------------------------------------------------------

# The Containerfile's FROM, as written: podman's own configuration says where
# a short name is pulled from, and a local image of that name answers to it.
from_image() { awk 'toupper($1) == "FROM" {print $2; exit}' Containerfile; }

# The host's apt mirror for Debian itself: the first deb entry with `main`
# and a suite other than security, updates or backports, from sources.list
# or deb822 files.
host_mirror() {
  python3 - <<'PY'
import glob, re
entries = []
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        line = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(line) >= 4 and line[0] == "deb":
            entries.append((line[1], [line[2]], line[3:]))
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for block in re.split(r"\n\s*\n", open(path).read()):
        fields = {}
        for line in block.splitlines():
            if ":" in line and not line.startswith(("#", " ")):
                name, value = line.split(":", 1)
                fields[name.strip().lower()] = value.split()
        if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"]) != ["no"]:
            for uri in fields.get("uris", []):
                entries.append((uri, fields.get("suites", []), fields.get("components", [])))
for uri, suites, components in entries:
    if "main" in components and any(not re.search(r"-(security|updates|backports)$|/updates$", s) for s in suites):
        print(uri)
        break
PY
}

debootstrap_base() {
  local name=$1 tag suite host_suite mirror rootfs="$WORK/rootfs" conf
  tag=${name##*:}; suite=${tag%%-*}
  host_suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  mirror=$(host_mirror)
  [ -n "$mirror" ] || { echo "no Debian mirror in the host's apt sources" >&2; return 1; }
  say "making $name: debootstrap --variant=minbase $suite from the host's apt mirror (log in $WORK/debootstrap.log)"
  rm -rf "$rootfs"
  debootstrap --variant=minbase --include=ca-certificates "$suite" "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1
  # The host's apt sources (its suite named as the image's) and its own apt
  # settings (files no package owns), so apt in the build reaches the same
  # mirror the same way.
  rm -f "$rootfs/etc/apt/sources.list"
  for conf in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$conf" ] || continue
    mkdir -p "$rootfs$(dirname "$conf")"
    if [ -n "$host_suite" ] && [ "$host_suite" != "$suite" ]; then
      sed -E "s/\b$host_suite\b/$suite/g" "$conf" >"$rootfs$conf"
    else
      cp "$conf" "$rootfs$conf"
    fi
  done
  for conf in /etc/apt/apt.conf.d/*; do
    dpkg -S "$conf" >/dev/null 2>&1 || cp "$conf" "$rootfs/etc/apt/apt.conf.d/"
  done
  # The host's extra CA certificates: the package indexes may be reached
  # through a TLS proxy the host trusts.
  if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
    cp -r /usr/local/share/ca-certificates/. "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >>"$WORK/debootstrap.log" 2>&1
    say "with the host's CA certificates: $(cd /usr/local/share/ca-certificates && find . -name '*.crt' | wc -l) from /usr/local/share/ca-certificates"
  fi
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  : >"$rootfs/etc/resolv.conf"; : >"$rootfs/etc/hostname"
  tar --numeric-owner -C "$rootfs" -cf "$WORK/base.tar" .
  podman import --change 'CMD ["bash"]' \
    --message "debootstrap --variant=minbase $suite, the host's apt sources (scripts/container-check.sh)" \
    "$WORK/base.tar" "$name" >>"$WORK/debootstrap.log" 2>&1
  rm -rf "$rootfs" "$WORK/base.tar"
}

base() {
  BASE_IMAGE=$(from_image)
  if podman image exists "$BASE_IMAGE"; then
    say "$BASE_IMAGE: in podman's storage already ($(podman image inspect "$BASE_IMAGE" --format '{{.Id}}' | cut -c1-12))"
  elif timeout 300 podman pull -q "$BASE_IMAGE" >"$WORK/pull.log" 2>&1; then
    say "$BASE_IMAGE: pulled"
  else
    say "$BASE_IMAGE could not be pulled: $(tail -1 "$WORK/pull.log" | cut -c1-160)"
    debootstrap_base "$BASE_IMAGE"
  fi
}

runtime() {
  if ! podman run --rm --network none "$BASE_IMAGE" true >"$WORK/runtime.log" 2>&1; then
    echo "no container of $BASE_IMAGE ran (log in $WORK/runtime.log); a base made here can be made again after: podman rmi $BASE_IMAGE" >&2
    return 1
  fi
  say "a container of $BASE_IMAGE started and ended"
}

# --- the image, run --------------------------------------------------------

build() {
  local previous
  previous=$(podman image inspect "$IMAGE" --format '{{.Id}}' 2>/dev/null || true)
  say "podman build --format docker -t $IMAGE (log in $WORK/build.log)"
  podman build --format docker --pull=never --network host -t "$IMAGE" -f Containerfile . >"$WORK/build.log" 2>&1
  # The image this build replaced under the tag: its layers that the new one
  # shares stay, the rest go.
  if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect "$IMAGE" --format '{{.Id}}')" ]; then
    podman rmi "$previous" >/dev/null 2>&1 || true
  fi
  # Each RUN step, and whether the layer came from the cache.
  awk '/^STEP [0-9]+\/[0-9]+: / {if (run) print "  ran:    " run; run = ($3 == "RUN") ? substr($0, 1, 100) : ""}
       /^--> Using cache/ {if (run) print "  cached: " run; run = ""}
       END {if (run) print "  ran:    " run}' "$WORK/build.log"
  local healthcheck
  healthcheck=$(podman image inspect "$IMAGE" --format '{{json .HealthCheck}}')
  case "$healthcheck" in
    *PENELOPE_PORT*) say "the image keeps its HEALTHCHECK, on PENELOPE_PORT" ;;
    *) echo "the image has no HEALTHCHECK on PENELOPE_PORT: $healthcheck" >&2; return 1 ;;
  esac
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Until `podman healthcheck run` says healthy (the image's own check, inside
# the container; no systemd timer runs it here), failing at once if the
# container has stopped.
wait_healthy() {
  local container=$1 deadline=$((SECONDS + 150))
  while [ $SECONDS -lt $deadline ]; do
    if [ "$(podman inspect "$container" --format '{{.State.Running}}')" != true ]; then
      echo "$container stopped: $(podman inspect "$container" --format '{{.State.Status}} exit {{.State.ExitCode}}')" >&2
      return 1
    fi
    if podman healthcheck run "$container" >/dev/null 2>&1; then
      say "$container: healthy ($(podman inspect "$container" --format '{{.State.Health.Status}}'))"
      return 0
    fi
    sleep 1
  done
  echo "$container: not healthy in 150 s" >&2
  return 1
}

run() {
  RUN_PORT=$(free_port)
  podman volume create "$RUN-store" >/dev/null
  podman run -d --name "$RUN" -p "127.0.0.1:$RUN_PORT:$WORKER_PORT" -e PENELOPE_PORT="$WORKER_PORT" \
    -v "$RUN-store:/data/store" --read-only --tmpfs /home/penelope:rw,size=256m,mode=1777 --shm-size 256m \
    --cap-drop ALL --security-opt no-new-privileges --memory 1536m "$IMAGE" >"$WORK/run.log" 2>&1
  say "$RUN on 127.0.0.1:$RUN_PORT -> $WORKER_PORT, store on the volume $RUN-store"
  wait_healthy "$RUN"
  "${CLIENT[@]}" wait "http://127.0.0.1:$RUN_PORT" 30
}

store_file() { podman exec "$1" cat "/data/store/$2"; }

calls() {
  local gateway
  # The receiver listens on the host, where the container's network meets it.
  gateway=$(podman inspect "$RUN" --format '{{range .NetworkSettings.Networks}}{{.Gateway}}{{end}}')
  KEY=$(store_file "$RUN" key) WEBHOOK_SECRET=$(store_file "$RUN" webhook_secret) \
    "${CLIENT[@]}" calls "http://127.0.0.1:$RUN_PORT" "$WORK/state.json" "$gateway"
}

restart() {
  local began
  began=$(date +%s%N)
  podman restart "$RUN" >>"$WORK/run.log" 2>&1
  say "podman restart $RUN: $(seconds "$(ms_since "$began")")"
  wait_healthy "$RUN"
  "${CLIENT[@]}" wait "http://127.0.0.1:$RUN_PORT" 30
  KEY=$(store_file "$RUN" key) "${CLIENT[@]}" after "http://127.0.0.1:$RUN_PORT" "$WORK/state.json"
}

# Every process of the container, a line each: name uid gid CapPrm CapEff
# NoNewPrivs Seccomp; then whether the root file system took a write.
process_facts() {
  podman exec "$1" sh -c '
    for status in /proc/[0-9]*/status; do
      awk "/^Name:/ {n=\$2} /^Uid:/ {u=\$2} /^Gid:/ {g=\$2} /^CapPrm:/ {p=\$2} /^CapEff:/ {e=\$2}
           /^NoNewPrivs:/ {x=\$2} /^Seccomp:/ {s=\$2} END {if (n) print n, u, g, p, e, x, s}" "$status" 2>/dev/null
    done
    touch /app/.write-check 2>/dev/null && echo root-writable || echo root-read-only'
}

check_security() {
  local container=$1 uid=$2 want_nnp=$3 facts name puid pgid prm eff nnp seccomp count=0
  facts=$(process_facts "$container")
  while read -r name puid pgid prm eff nnp seccomp; do
    case "$name" in root-*) continue ;; esac
    count=$((count + 1))
    if [ "$puid" != "$uid" ] || [ "$pgid" != "$uid" ] || [ "$prm" != 0000000000000000 ] || [ "$eff" != 0000000000000000 ]; then
      echo "process $name: uid $puid gid $pgid capabilities $prm/$eff, not uid $uid without capabilities" >&2; return 1
    fi
    if [ "$want_nnp" = 1 ] && [ "$nnp" != 1 ]; then echo "process $name may gain privileges (NoNewPrivs $nnp)" >&2; return 1; fi
    [ "$seccomp" = 2 ] || { echo "process $name runs without a seccomp filter (Seccomp $seccomp)" >&2; return 1; }
  done <<<"$facts"
  grep -qx root-read-only <<<"$facts" || { echo "the root file system took a write" >&2; return 1; }
  [ "$(podman inspect "$container" --format '{{.HostConfig.ReadonlyRootfs}}')" = true ]
  say "$container: $count processes ($(awk '!/^root-/ {print $1}' <<<"$facts" | sort -u | tr '\n' ' ')), all uid/gid $uid, no capabilities, seccomp$([ "$want_nnp" = 1 ] && echo ', no privilege escalation'); root file system read-only"
}

security() {
  local container=$1 uid=$2 want_nnp=$3 facts bad
  facts=$(process_facts "$container")
  bad=$(echo "$facts" | grep -E '^Name:' | grep -vE "Uid:=$uid Gid:=$uid .*CapEff:=0000000000000000 CapPrm:=0000000000000000 " || true)
  [ -z "$bad" ] || { echo "processes not uid $uid without capabilities: $bad" >&2; return 1; }
  if [ "$want_nnp" = 1 ] && echo "$facts" | grep -E '^Name:' | grep -qv 'NoNewPrivs:=1'; then
    echo "a process may gain privileges: $facts" >&2; return 1
  fi
  echo "$facts" | grep -qx root-read-only || { echo "the root file system took a write" >&2; return 1; }
  [ "$(podman inspect "$container" --format '{{.HostConfig.ReadonlyRootfs}}')" = true ]
  say "$container: $(echo "$facts" | grep -c '^Name:') processes, all uid/gid $uid, no capabilities$([ "$want_nnp" = 1 ] && echo ', no privilege escalation'), root file system read-only"
}

security() {
  check_security "$RUN" 10001 1
  [ "$(podman inspect "$RUN" --format '{{.Config.User}}')" = 10001:10001 ] && say "the image's USER: 10001:10001"
}

# --- the pod spec ------------------------------------------------------------

export_spec() {
  KUBE="$WORK/kube"
  KUBE_PORT=$(free_port)
  rm -rf "$KUBE"; mkdir -p "$KUBE"; chmod 0755 "$KUBE"
  printf '{"personas": [{"name": "%s", "store": "stores/%s", "port": 5001, "mode": "always", "idle_timeout_s": 60}]}\n' \
    "$PERSONA" "$PERSONA" >"$KUBE/personas.json"
  chmod 0644 "$KUBE/personas.json"
  # The export and its conversion run in the image: its venv has Django and PyYAML.
  # The worker's pod is what is checked: the console's Deployment is left out.
  podman run --rm --network none -v "$KUBE:/in:ro" "$IMAGE" sh -c \
    "/app/.venv/bin/python manage.py waker export-kubernetes /in/personas.json --namespace penelope-check --no-console --image $IMAGE >/tmp/export.yaml \
     && /app/.venv/bin/python scripts/container/kube_for_podman.py $KUBE_PORT </tmp/export.yaml" \
    >"$KUBE/bundle.json" 2>"$WORK/export.log"
  (umask 077 && python3 - "$KUBE" <<'PY'
import base64, json, pathlib, sys
kube = pathlib.Path(sys.argv[1])
bundle = json.loads((kube / "bundle.json").read_text())
(kube / "play.yaml").write_text(bundle["play"])
for name, data in bundle["secrets"].items():
    (kube / f"secret.{name}.json").write_text(json.dumps(data))
(kube / "workloads").write_text("\n".join(bundle["workloads"]) + "\n")
for name, expect in bundle["expect"].items():
    (kube / f"expect.{name}").write_text(" ".join(f"{k}={v}" for k, v in expect.items()) + "\n")
[key] = [base64.b64decode(data["PENELOPE_KEY"]).decode() for data in bundle["secrets"].values()]
(kube / "key").write_text(key)
(kube / "probes").write_text("".join(f"{probe}\n" for probe in bundle["probes"]))
print(f"  played: {', '.join(bundle['played'])} (the StatefulSet as a Deployment)")
print(f"  made with podman secret create: {', '.join(bundle['secrets'])}")
print(f"  not played (podman runs no such kind): {', '.join(bundle['left_out']) or 'nothing'}")
print(f"  probes taken out, their routes called instead: {'; '.join(bundle['probes']) or 'none'}")
PY
  )
  rm -f "$KUBE/bundle.json"
}

kube() {
  local secret workload pod container expect memory
  for secret in "$KUBE"/secret.*.json; do
    secret=${secret##*/secret.}; secret=${secret%.json}
    podman secret create "$secret" "$KUBE/secret.$secret.json" >/dev/null
  done
  podman kube play "$KUBE/play.yaml" >"$WORK/kube.log" 2>&1
  # podman skips a kind it does not run with exit 0: each workload must be a running pod.
  while read -r -u 3 workload; do
    [ -n "$workload" ] || continue
    pod=$(podman pod ps --format '{{.Name}}' --filter "name=^$workload-pod" | head -1)
    [ -n "$pod" ] || { echo "podman kube play made no pod for $workload" >&2; cat "$WORK/kube.log" >&2; return 1; }
    [ "$(podman pod inspect "$pod" --format '{{.State}}')" = Running ] || { echo "pod $pod is not running" >&2; return 1; }
    container=$(podman ps --filter "pod=$pod" --format '{{.Names}}' | grep -- '-worker$')
    say "pod $pod runs, its container $container"
    # The probes' routes, as the kubelet would ask them, through the port
    # published for the container's (the startup probe allows 120 s).
    local probe path port
    while read -r -u 4 probe _ path _ port; do
      [ "$port" = "$(podman port "$container" | awk -F/ 'NR == 1 {print $1}')" ] \
        || { echo "$probe asks port $port, which is not the pod's published port: $(podman port "$container")" >&2; return 1; }
      "${CLIENT[@]}" wait "http://127.0.0.1:$KUBE_PORT" 150 "$path" | sed "s/^  /  $probe: /"
      [ "$(podman inspect "$container" --format '{{.State.Running}}')" = true ] || { echo "$container stopped" >&2; return 1; }
    done 4<"$KUBE/probes"
    expect=$(cat "$KUBE/expect.$workload")
    [[ "$expect" == *"read_only_root=True"* && "$expect" == *"drop_all=True"* ]] \
      || { echo "the export no longer asks for a read-only root and no capabilities: $expect" >&2; return 1; }
    check_security "$container" "$(sed -E 's/.*uid=([0-9]+).*/\1/' <<<"$expect")" \
      "$([[ "$expect" == *no_new_privileges=True* ]] && echo 1 || echo 0)"
    memory=$(sed -E 's/.*memory_bytes=([0-9]+).*/\1/' <<<"$expect")
    [ "$(podman inspect "$container" --format '{{.HostConfig.Memory}}')" = "$memory" ] \
      || { echo "memory limit $(podman inspect "$container" --format '{{.HostConfig.Memory}}'), not $memory" >&2; return 1; }
    [ "$(podman exec "$container" cat /sys/fs/cgroup/memory.max 2>/dev/null || podman exec "$container" cat /sys/fs/cgroup/memory/memory.limit_in_bytes)" = "$memory" ] \
      || { echo "the container's cgroup does not hold the memory limit $memory" >&2; return 1; }
    say "memory limit $memory bytes in force (the manifest's limits.memory)"
    "${CLIENT[@]}" pod "http://127.0.0.1:$KUBE_PORT" "$(cat "$KUBE/key")"
    podman kube down "$KUBE/play.yaml" >>"$WORK/kube.log" 2>&1
    say "podman kube down: pod removed"
  done 3<"$KUBE/workloads"
}

mkdir -p "$WORK"
rm -f "$WORK"/*.log "$WORK/state.json"
step install install
step config config
remove_made  # what an interrupted run left: a second kube play fails on an existing volume
step base base
step runtime runtime
step build build
step run run
step calls calls
step restart restart
step security security
step export export_spec
step kube kube
