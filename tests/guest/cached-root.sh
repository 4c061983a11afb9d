#!/bin/sh
# The guest tier's wrapper around its command in the virtme-ng guest:  cached-root.sh TAG COMMAND...
# The command runs on a cached view of the host's root (TAG, which conftest.py exports), made by the qemu backend's
# own topologies/qemu/cached-root.sh; where it cannot be made the command runs on the uncached root, only slower.
tag="$1"; shift
/bin/sh "$(dirname "$0")/../../topologies/qemu/cached-root.sh" "$tag" /run/vnbtest-root \
  || echo "cached-root: the command runs (partly) on the uncached root" >&2
exec "$@"
