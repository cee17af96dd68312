#!/usr/bin/env bash
# Base images for `make image LOCAL_BASES=1`, on a machine that cannot pull the Containerfile's
# public bases: Debian roots made by mmdebstrap from Debian's packages, imported into podman.
#   GO_BASE       Debian trixie: golang-go (Go >= 1.24), python3, python3-venv, git
#   NODE_BASE     Debian trixie: nodejs (20.19), npm
#   RUNTIME_BASE  Debian bookworm: python3, python3-venv
# They provide what each stage runs (go, apt-get, npm, python3 -m venv). The root tarballs are
# cached in $CACHE, keyed by suite and package list; an image already in podman is kept.
# Prints the --build-arg flags for `podman build`. Needs mmdebstrap and podman (root).
set -euo pipefail

CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/model-serving-addon/image-bases}
PODMAN=${PODMAN:-podman}

# base <build-arg> <image name> <suite> <packages>
base() {
    local arg=$1 name=$2 suite=$3 packages=$4
    local key
    key=$(printf '%s %s' "$suite" "$packages" | sha1sum | cut -c1-12)
    local image="localhost/$name:$suite-$key" tarball="$CACHE/$name-$suite-$key.tar"
    if ! "$PODMAN" image exists "$image"; then
        if [ ! -f "$tarball" ]; then
            mkdir -p "$CACHE"
            # (mmdebstrap picks the output format by extension: keep .tar)
            mmdebstrap --quiet --variant=apt --include="$packages" "$suite" "$tarball.part.tar" >&2
            mv "$tarball.part.tar" "$tarball"
        fi
        "$PODMAN" import --quiet "$tarball" "$image" >&2
    fi
    printf -- '--build-arg %s=%s ' "$arg" "$image"
}

base GO_BASE model-serving-addon-go-base trixie "ca-certificates,git,golang-go,python3,python3-venv"
base NODE_BASE model-serving-addon-node-base trixie "ca-certificates,nodejs,npm"
base RUNTIME_BASE model-serving-addon-python-base bookworm "ca-certificates,python3,python3-venv"
echo
