# Sourced by .ci/install.
# apt-get, waiting while another apt or dpkg run holds its lock (apt's own timeout covers dpkg's lock;
# the package lists' lock of a concurrent `apt-get update` is waited for here), up to 10 minutes.
apt_get() {
    local waited=0 told="" err
    while :; do
        if err=$(apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1 >/dev/null); then
            return 0
        fi
        if ! grep -q "Could not get lock\|Unable to acquire\|is held by process" <<<"$err" || [ "$waited" -ge 600 ]; then
            printf '%s\n' "$err" >&2
            return 1
        fi
        if [ -z "$told" ]; then
            echo ".ci/install: another apt run holds its lock; waiting for it (up to 10 min)" >&2
            told=1
        fi
        sleep "${APT_LOCK_POLL:-5}"
        waited=$((waited + ${APT_LOCK_POLL:-5}))
    done
}
