#!/bin/sh
# Run inside each qemu-backend guest as its only command (virtme-ng's init runs it): network, sshd, then wait.
#   guest.sh MAC ADDRESS/PREFIX SHARED_DIR [CACHED_TAG]
# The guest's /etc, /var and /tmp are private overlays of the host's and /run is its own tmpfs, so what this
# changes stays in the guest. The host waits for the "vnetbench-guest-ready" line on the guest's console and
# reads the NIC's name, the kernel and the CPU's hypervisor flag from it; "vnetbench-guest-failed" says why not.
mac="$1" address="$2" shared="$3" cached="$4"
fail() { echo "vnetbench-guest-failed $*"; exec sleep 3600; }

# a cached view of the host's root (cached-root.sh says why and how), from CACHED_TAG
if [ -n "$cached" ]; then
  /bin/sh "$(dirname "$0")/cached-root.sh" "$cached" /run/vnetbench-root 2>/run/vnetbench-root.err \
    || fail "$(tail -n 1 /run/vnetbench-root.err)"
fi

ip link set lo up || fail "ip link set lo up"
# the NIC is found by its MAC: its name depends on the machine type and the kernel (enp0s2, eth0, ...)
nic=
for dev in /sys/class/net/*; do
  [ "$(cat "$dev/address" 2>/dev/null)" = "$mac" ] && nic="${dev##*/}"
done
[ -n "$nic" ] || fail "no NIC with MAC $mac"
ip addr add "$address" dev "$nic" || fail "ip addr add $address dev $nic"
ip link set "$nic" up || fail "ip link set $nic up"

# root's account: virtme-ng's init marks it locked ('!'), which sshd refuses without PAM; and its shell is
# /bin/sh, so that no start-up file of the host's root (a .bashrc) runs for every daemon mpirun starts. Both
# files are rewritten in place: virtme-ng bind-mounts /etc/shadow from its tmpfs.
sed 's/^root:[^:]*:/root:*:/' /etc/shadow > /run/vnetbench-shadow && cat /run/vnetbench-shadow > /etc/shadow \
  || fail "could not unlock root in the guest's /etc/shadow"
sed 's|^\(root:[^:]*:0:0:[^:]*:[^:]*:\).*|\1/bin/sh|' /etc/passwd > /run/vnetbench-passwd \
  && cat /run/vnetbench-passwd > /etc/passwd || fail "could not set root's shell in the guest's /etc/passwd"
rm -f /run/vnetbench-shadow /run/vnetbench-passwd /run/nologin /var/run/nologin /etc/nologin
mkdir -p /run/sshd && chmod 755 /run/sshd
/usr/sbin/sshd -f "$shared/sshd_config" -E /run/sshd.log || fail "sshd did not start: $(tail -n 3 /run/sshd.log)"

flags=$(grep -m1 '^flags' /proc/cpuinfo)
case " $flags " in *" hypervisor "*) hypervisor=1 ;; *) hypervisor=0 ;; esac
echo "vnetbench-guest-ready nic=$nic kernel=$(uname -r) hypervisor=$hypervisor uptime=$(cut -d' ' -f1 /proc/uptime)"
exec sleep infinity
