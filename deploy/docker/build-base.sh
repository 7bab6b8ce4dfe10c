#!/usr/bin/env bash
# Builds stand-ins for official images from Debian's packages, for machines that cannot pull from a registry,
# on one debootstrapped Debian root file system (kept as an image of its own, llm-locust/debian-minbase:bookworm).
# Cached: does nothing when an image of the target's name exists.
#
#   locust (the default): the official Locust image, under the official name (locustio/locust:VERSION, VERSION
#     from the Dockerfile's LOCUST_VERSION), so that the project's Dockerfile builds on it unchanged; a new
#     Locust version only reinstalls locust.
#   prometheus: Debian's `prometheus` package with prom/prometheus's layout, as llm-locust/prometheus:bookworm
#     (Debian's version is not the official image's, so not under its name): docker-compose.prometheus.yml runs
#     it with PROMETHEUS_IMAGE=llm-locust/prometheus:bookworm.
#
#   deploy/docker/build-base.sh                          # or: make docker-base
#   deploy/docker/build-base.sh prometheus               # or: make docker-prometheus
#   BASE_IMAGE=my/locust:2.47.0 deploy/docker/build-base.sh  # under another name (then build with
#                                                          # --build-arg BASE_IMAGE=my/locust:2.47.0)
#
# Needs: root (debootstrap), Debian's debootstrap, a running Docker daemon, and Debian's and PyPI's
# package servers (pip and apt run in a build with --network host; pip with this machine's CA bundle, CA_BUNDLE).
# Locust: took 77 s the first time here (debootstrap, then pip); the image is ~320 MB. Prometheus: 11 s on the
# cached root file system (apt); ~580 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."

target=${1:-locust}
version=$(sed -n 's/^ARG LOCUST_VERSION=//p' Dockerfile)
case "$target" in
    locust) base=${BASE_IMAGE:-locustio/locust:$version} ;;
    prometheus) base=${BASE_IMAGE:-llm-locust/prometheus:bookworm} ;;
    *) echo "unknown target: $target (locust or prometheus)" >&2; exit 2 ;;
esac
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

if [ "$target" = prometheus ]; then
    echo "building $base (stand-in: Debian's prometheus on $rootfs_image)"
    cp deploy/docker/prometheus-base.Dockerfile "$work/Dockerfile"
    docker build --quiet --network host --build-arg ROOTFS_IMAGE="$rootfs_image" -t "$base" "$work" >/dev/null
else
    echo "building $base (stand-in: locust $version on $rootfs_image)"
    cp deploy/docker/locust-base.Dockerfile "$work/Dockerfile"
    cp "$ca_bundle" "$work/ca-certificates.crt"
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$work/pip.conf"
    docker build --quiet --network host --build-arg ROOTFS_IMAGE="$rootfs_image" \
        --build-arg LOCUST_VERSION="$version" -t "$base" "$work" >/dev/null
fi
echo "$base: built ($(docker image inspect -f '{{.Size}}' "$base" | awk '{printf "%.0f MB", $1 / 1e6}'))"
