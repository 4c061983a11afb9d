#!/bin/sh
# Give this guest a cached view of the host's root:  cached-root.sh TAG MOUNTPOINT
# virtme-ng shares the host's root over 9p without a cache, so every file a process opens crosses to the host
# again (under TCG, 'import numpy' took 7 s, 'import numba' 22 s). TAG is a second, read-only 9p export of the
# same root that the guest may cache (cache=loose), mounted on MOUNTPOINT; its top-level folders are bound over
# the uncached ones, but for the guest's own (/proc, /sys, /dev, /run, /tmp), /etc and /var, and any folder with
# a mount of the guest's at or under it (virtme-ng's overlays, tmpfs and shared folders stay as they are).
# Exit 1, saying why on stderr, when TAG cannot be mounted or a folder bound (the others are still bound).
tag="$1" root="$2"
mkdir -p "$root" && mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=524288,cache=loose,access=any \
  "$tag" "$root" || { echo "cached-root: could not mount $tag on $root" >&2; exit 1; }
# the guest's mount points, one a line, read once by the shell itself: a process per folder (an awk) cost a tenth
# of a second each under TCG
mounts=
while read -r _ point _; do mounts="$mounts
$point"; done < /proc/mounts
status=0
for dir in "$root"/*; do
  name="${dir##*/}"
  case "$name" in proc|sys|dev|run|tmp|etc|var|lost+found) continue ;; esac
  [ -d "$dir" ] && [ ! -L "$dir" ] && [ -d "/$name" ] && [ ! -L "/$name" ] || continue
  case "$mounts
" in *"
/$name
"* | *"
/$name/"*) continue ;; esac
  mount --bind "$dir" "/$name" || { echo "cached-root: could not bind the cached /$name" >&2; status=1; }
done
exit $status
