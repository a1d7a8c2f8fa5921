# Sourced by .ci/install and .ci/test: where the prebuilt P4 tools are (p4c, BMv2, the TNA includes).
# P4GEN_P4TOOLCHAIN names the folder; by default ../shared/p4toolchain beside the checkout, used when it
# exists.  Sets TOOLCHAIN to the folder, or to "" when there is none (the p4c and BMv2 tests then skip).
if [ -n "${P4GEN_P4TOOLCHAIN:-}" ]; then
    if [ ! -f "$P4GEN_P4TOOLCHAIN/env.sh" ]; then
        echo "$0: P4GEN_P4TOOLCHAIN=$P4GEN_P4TOOLCHAIN has no env.sh (not a p4toolchain folder)" >&2
        exit 2
    fi
    TOOLCHAIN=$(cd "$P4GEN_P4TOOLCHAIN" && pwd)
elif [ -f ../shared/p4toolchain/env.sh ]; then
    TOOLCHAIN=$(cd ../shared/p4toolchain && pwd)
else
    TOOLCHAIN=""
fi
