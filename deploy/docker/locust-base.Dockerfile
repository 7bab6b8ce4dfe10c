# A stand-in for the official Locust image (locustio/locust:VERSION), for machines that cannot pull
# from a registry: the same layout on Debian's own Python — a venv in /opt/venv with the pinned
# locust, user `locust` (uid 1000), WORKDIR /home/locust, ENTRYPOINT ["locust"].
# Built by deploy/docker/build-base.sh (which explains the build context); not used otherwise.
ARG ROOTFS_IMAGE
FROM ${ROOTFS_IMAGE} AS builder
ARG LOCUST_VERSION
# this machine's CA bundle: pip must trust whatever this machine's network presents
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --cert /etc/ssl/certs/ca-certificates.crt "locust==${LOCUST_VERSION}"

FROM ${ROOTFS_IMAGE}
ARG LOCUST_VERSION
LABEL org.opencontainers.image.description="stand-in for locustio/locust:${LOCUST_VERSION}, built from Debian packages by llm-locust's deploy/docker/build-base.sh"
COPY --from=builder /opt/venv /opt/venv
# images built on top of this one run pip too (the project's Dockerfile): same CA bundle
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY pip.conf /etc/pip.conf
ENV PATH="/opt/venv/bin:$PATH" PYTHONUNBUFFERED=1
RUN useradd --create-home --uid 1000 locust && chown -R locust /opt/venv && locust --version
USER locust
WORKDIR /home/locust
EXPOSE 8089 5557
ENTRYPOINT ["locust"]
