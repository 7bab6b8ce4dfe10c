# llm-locust on the official Locust image: llm-locust installed, the ready-made locustfiles in
# /home/locust/locustfiles, and an entrypoint that runs `locust ARGS` as the owner of /results
# (deploy/docker/entrypoint.py: mount your results folder there and the files are yours). No secret
# is ever baked in: API keys come from the environment at run time (OPENAI_API_KEY, --api-key-env).
#
#   docker build -t llm-locust .
#   docker run --rm -e OPENAI_API_KEY -v "$PWD/results:/results" llm-locust \
#       -f /home/locust/locustfiles/chat.py --headless -u 8 -t 1m --host http://my-vllm:8000 --results-dir /results/run
#
# Another base: --build-arg BASE_IMAGE=... (an image laid out like the official one: locust in the
# PATH, user `locust`); deploy/docker/build-base.sh builds a stand-in from Debian's packages.
ARG LOCUST_VERSION=2.47.0
ARG BASE_IMAGE=locustio/locust:${LOCUST_VERSION}
# llm-locust's dependencies, read from pyproject.toml in a stage of their own: their layer below is
# rebuilt only when the list changes, not whenever pyproject.toml does
FROM ${BASE_IMAGE} AS requirements
COPY pyproject.toml /tmp/llm-locust/
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/llm-locust/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt

FROM ${BASE_IMAGE}
USER root
COPY --from=requirements /tmp/requirements.txt /tmp/requirements.txt
RUN pip install --no-cache-dir -r /tmp/requirements.txt && rm /tmp/requirements.txt
COPY pyproject.toml README.md /tmp/llm-locust/
COPY llm_locust /tmp/llm-locust/llm_locust
RUN pip install --no-cache-dir --no-deps /tmp/llm-locust && rm -rf /tmp/llm-locust
COPY locustfiles /home/locust/locustfiles
COPY deploy/docker/entrypoint.py /usr/local/bin/llm-locust-entrypoint
RUN mkdir -p /results && chown locust:locust /results && chmod 755 /usr/local/bin/llm-locust-entrypoint

WORKDIR /home/locust
# root only until the entrypoint has switched to the owner of /results (`locust` when nothing is mounted)
ENTRYPOINT ["llm-locust-entrypoint"]
