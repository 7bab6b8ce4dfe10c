# A stand-in for the official Prometheus image (prom/prometheus), for machines that cannot pull from a registry:
# Debian's `prometheus` package on the same bookworm root file system as the Locust stand-in, with the official
# image's layout — ENTRYPOINT the prometheus binary, the data in the volume /prometheus (its WORKDIR), user nobody,
# port 9090 — so that docker-compose.prometheus.yml runs either image with the same service definition.
# Built by deploy/docker/build-base.sh (`build-base.sh prometheus`); not used otherwise.
ARG ROOTFS_IMAGE
FROM ${ROOTFS_IMAGE}
LABEL org.opencontainers.image.description="stand-in for prom/prometheus, Debian's prometheus package, built by llm-locust's deploy/docker/build-base.sh"
# policy-rc.d: the package's postinst must not try to start a service in the build
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /usr/sbin/policy-rc.d \
    && mkdir /prometheus && chown nobody:nogroup /prometheus \
    && prometheus --version
USER nobody
WORKDIR /prometheus
VOLUME ["/prometheus"]
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
