#!/usr/bin/env bash
# Installs the system packages the test suite uses, when missing: as root
# with apt-get. Silent when everything is there. When something is still
# missing afterwards (not root, no apt-get, apt-get failed) it names it and
# exits 1: tests needing it would skip, and with CI=true fail.
set -u

# missing prints the packages whose files are not here.
missing() {
	local m=()
	command -v iptables >/dev/null 2>&1 || m+=(iptables)
	command -v ip >/dev/null 2>&1 || m+=(iproute2)
	{ [ -f /usr/share/java/zookeeper.jar ] && [ -d /etc/zookeeper/conf ]; } || m+=(zookeeper)
	command -v java >/dev/null 2>&1 || m+=(default-jre-headless) # ZooKeeper's JRE
	command -v kcat >/dev/null 2>&1 || m+=(kcat)
	command -v fusermount3 >/dev/null 2>&1 || m+=(fuse3)
	echo "${m[*]}"
}

need=$(missing)
[ -z "$need" ] && exit 0

fail() {
	echo "deps: missing $need ($1); install them with: apt-get install --no-install-recommends $need (make deps does it as root)" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || fail "not root, so not installing"
command -v apt-get >/dev/null 2>&1 || fail "no apt-get here"

echo "deps: installing $need"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# A failed update (one unreachable mirror) may still leave the lists the
# install needs: say so and go on; the check after the install decides.
if ! apt-get update -qq >"$log" 2>&1; then
	echo "deps: apt-get update failed:" >&2
	cat "$log" >&2
fi
# shellcheck disable=SC2086 # one word per package
if ! apt-get install -y -qq --no-install-recommends $need >"$log" 2>&1; then
	echo "deps: apt-get install $need failed:" >&2
	cat "$log" >&2
fi
need=$(missing)
[ -z "$need" ] || fail "still missing after apt-get install"
exit 0
