#!/bin/sh
# The guest tier's wrapper around its command in the virtme-ng guest:  cached-root.sh TAG COMMAND...
# virtme-ng shares the host's root over 9p without a cache, so every file a Python process opens crosses to the
# host again (under TCG, seconds per import of numpy or vnetbench). TAG is a second, read-only export of the same
# root (conftest.py adds it) that the guest may cache: bound over each top-level folder that virtme-ng shares
# as it is (not one of its own overlays or tmpfs, nothing mounted inside it), as the qemu backend's guest.sh
# does. Where it cannot be mounted the command runs on the uncached root, only slower.
tag="$1"; shift
if mkdir -p /run/vnbtest-root && mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=524288,cache=loose,access=any \
     "$tag" /run/vnbtest-root; then
  for dir in /run/vnbtest-root/*; do
    name="${dir##*/}"
    case "$name" in proc|sys|dev|run|tmp|lost+found) continue ;; esac
    [ -d "$dir" ] && [ ! -L "$dir" ] && [ -d "/$name" ] && [ ! -L "/$name" ] || continue
    # virtme-ng's own mounts (overlays, tmpfs, the shared folder) and anything under them stay as they are
    awk -v top="/$name" '$2 == top || index($2, top "/") == 1 {found = 1} END {exit !found}' /proc/mounts && continue
    mount --bind "$dir" "/$name" || echo "cached-root: could not bind /$name: uncached" >&2
  done
else
  echo "cached-root: no cached root ($tag): the command runs on the uncached one" >&2
fi
exec "$@"
