#!/usr/bin/env bash
# Installs the system packages the test suite uses, when missing and when we
# can (root with apt-get). Tests that need one that is still missing skip
# with a message that names it.
set -u
need=()
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper) # pulls default-jre-headless

[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: not root or no apt-get; tests needing ${need[*]} will skip"
	exit 0
fi
echo "deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
	|| echo "deps: apt-get install ${need[*]} failed; tests needing them will skip"
exit 0
