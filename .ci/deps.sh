#!/usr/bin/env bash
# Installs the system packages the test suite uses, when missing: as root
# with apt-get. Silent when everything is there. When something is still
# missing afterwards (not root, no apt-get, apt-get failed) it names it and
# exits 1: tests needing it would skip, and with CI=true fail. Then the
# client matrix's node modules (kafkajs, pinned by its package-lock.json):
# npm ci when they are missing, failing loudly when it cannot.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)

# missing prints the packages whose files are not here.
missing() {
	local m=()
	command -v iptables >/dev/null 2>&1 || m+=(iptables)
	command -v ip >/dev/null 2>&1 || m+=(iproute2)
	{ [ -f /usr/share/java/zookeeper.jar ] && [ -d /etc/zookeeper/conf ]; } || m+=(zookeeper)
	command -v java >/dev/null 2>&1 || m+=(default-jre-headless) # ZooKeeper's JRE
	command -v kcat >/dev/null 2>&1 || m+=(kcat)
	command -v fusermount3 >/dev/null 2>&1 || m+=(fuse3)
	command -v node >/dev/null 2>&1 || m+=(nodejs)
	command -v npm >/dev/null 2>&1 || m+=(npm)
	echo "${m[*]}"
}

# node_modules installs the node modules of each folder of the client
# matrix that has a package-lock.json, when missing, as the lock says.
node_modules() {
	local dir
	for dir in "$root"/integration/clients/*/; do
		[ -f "$dir/package-lock.json" ] || continue
		[ -d "$dir/node_modules" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ] && continue
		echo "deps: npm ci in ${dir#"$root"/}"
		if ! (cd "$dir" && npm ci --no-audit --no-fund --silent); then
			echo "deps: npm ci in ${dir#"$root"/} failed: the client matrix cannot run kafkajs" >&2
			exit 1
		fi
	done
}

need=$(missing)
if [ -z "$need" ]; then
	node_modules
	exit 0
fi

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
node_modules
exit 0
