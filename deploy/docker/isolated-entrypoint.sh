#!/bin/sh
# Entrypoint of the compose profile `isolated` (docker-compose.yml, README "Docker"): the gateway
# runs as root in its container, as on a host, so each tenant's commands get a host uid of their
# own (SANDBOX_UID_RANGE) and per-tenant cgroups, and workspaces can be loop-mounted filesystems
# sized to their quota. The container must be given CAP_SYS_ADMIN, a private cgroup namespace,
# /dev/loop-control and the loop devices (block major 7) by its runtime; this script prepares
# what the image alone cannot, then execs the command (the gateway). Each step that fails is
# reported and skipped: the gateway then starts with less isolation and /status says which.
set -u

say() { echo "tool-gateway-isolated: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  say "not root (uid $(id -u)): nothing to prepare; the gateway runs with the non-root isolation"
  exec "$@"
fi

# Docker mounts the container's cgroup file systems read-only; with CAP_SYS_ADMIN they can be
# remounted read-write. With a private cgroup namespace only the container's own subtree is seen.
for dir in $(awk '$3 == "cgroup2" || $3 == "cgroup" { print $2 }' /proc/mounts); do
  if awk -v d="$dir" '$2 == d && $4 ~ /(^|,)ro(,|$)/ { found = 1 } END { exit !found }' /proc/mounts; then
    mount -o remount,rw "$dir" 2>/dev/null || say "cannot remount $dir read-write: no per-tenant cgroups"
  fi
done

# cgroup v2 hands controllers only to groups whose parent holds no process. The container's
# processes (the init and this script) start in the namespace's root: move them into a leaf
# `init`, so the gateway can make its tool-gateway group beside it with cpu, memory and pids
# (src/builtin/sandbox/cgroups.ts).
cg=/sys/fs/cgroup
if [ -f "$cg/cgroup.controllers" ] && [ -w "$cg/cgroup.procs" ]; then
  mkdir -p "$cg/init" 2>/dev/null
  # A process may exit between the read and the write.
  while read -r pid; do echo "$pid" > "$cg/init/cgroup.procs" 2>/dev/null || true; done < "$cg/cgroup.procs"
  echo '+cpu +memory +pids' > "$cg/cgroup.subtree_control" 2>/dev/null \
    || say "cannot enable cpu, memory and pids in $cg: no per-tenant cgroups"
fi

# A container's /dev is a tmpfs with no loop nodes: losetup gets a free loop number from
# /dev/loop-control, then opens /dev/loopN, which must exist. Nodes for loop0..loop255 (each
# mounted workspace holds one); the runtime must allow the devices (device_cgroup_rules b 7:*).
if [ -c /dev/loop-control ]; then
  i=0
  while [ "$i" -lt 256 ]; do
    [ -e "/dev/loop$i" ] || mknod -m 0660 "/dev/loop$i" b 7 "$i" 2>/dev/null || { say "cannot make /dev/loop$i: no loop-mounted workspaces"; break; }
    i=$((i + 1))
  done
else
  say "no /dev/loop-control: no loop-mounted workspaces (the quota watchdog applies)"
fi

exec "$@"
