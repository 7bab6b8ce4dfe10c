#!/usr/bin/env bash
# Builds a stand-in for the official Locust image from Debian's packages, under the official name
# (locustio/locust:VERSION, VERSION from the Dockerfile's LOCUST_VERSION), for machines that cannot
# pull from a registry. Cached: does nothing when an image of that name exists (the official one
# or an earlier stand-in); the Debian root file system is kept as an image of its own
# (llm-locust/debian-minbase:bookworm), so a new Locust version only reinstalls locust.
#
#   deploy/docker/build-base.sh                          # or: make docker-base
#   BASE_IMAGE=my/locust:2.47.0 deploy/docker/build-base.sh  # under another name (then build with
#                                                          # --build-arg BASE_IMAGE=my/locust:2.47.0)
#
# Needs: root (debootstrap), Debian's debootstrap, a running Docker daemon, and Debian's and PyPI's
# package servers (pip runs in a build with --network host and this machine's CA bundle, CA_BUNDLE).
# Took 77 s the first time here (debootstrap, then pip); the image is ~320 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=$(sed -n 's/^ARG LOCUST_VERSION=//p' Dockerfile)
base=${BASE_IMAGE:-locustio/locust:$version}
rootfs_image=llm-locust/debian-minbase:bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ca_bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

if docker image inspect "$base" >/dev/null 2>&1; then
    echo "$base: already there"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! docker image inspect "$rootfs_image" >/dev/null 2>&1; then
    echo "debootstrap: Debian bookworm (minbase, Python 3) -> $rootfs_image"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log" >&2; echo "debootstrap failed (log above)" >&2; exit 1; }
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
    tar -C "$work/rootfs" -c . | docker import - "$rootfs_image" >/dev/null
    rm -rf "$work/rootfs"
fi

echo "building $base (stand-in: locust $version on $rootfs_image)"
cp deploy/docker/locust-base.Dockerfile "$work/Dockerfile"
cp "$ca_bundle" "$work/ca-certificates.crt"
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$work/pip.conf"
docker build --quiet --network host --build-arg ROOTFS_IMAGE="$rootfs_image" \
    --build-arg LOCUST_VERSION="$version" -t "$base" "$work" >/dev/null
echo "$base: built ($(docker image inspect -f '{{.Size}}' "$base" | awk '{printf "%.0f MB", $1 / 1e6}'))"
