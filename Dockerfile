# llm-locust on the official Locust image: the `locust` entrypoint with llm-locust installed,
# the ready-made locustfiles in /home/locust/locustfiles. No secret is ever baked in: API keys come
# from the environment at run time (OPENAI_API_KEY, or --api-key-env NAME).
#
#   docker build -t llm-locust .
#   docker run --rm -e OPENAI_API_KEY -v "$PWD/results:/results" llm-locust \
#       -f /home/locust/locustfiles/chat.py --headless -u 8 -t 1m --host http://my-vllm:8000 --results-dir /results/run
ARG LOCUST_VERSION=2.47.0
FROM locustio/locust:${LOCUST_VERSION}

USER root
COPY pyproject.toml README.md /tmp/llm-locust/
COPY llm_locust /tmp/llm-locust/llm_locust
RUN pip install --no-cache-dir /tmp/llm-locust && rm -rf /tmp/llm-locust
COPY locustfiles /home/locust/locustfiles
RUN mkdir -p /results && chown locust /results

USER locust
WORKDIR /home/locust
# ENTRYPOINT ["locust"] comes from the base image.
