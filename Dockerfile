# The mnemo-ops image for Kubernetes CronJobs (docs/scheduling.md, "The image"): the same install as
# on one machine, a wheel built from this checkout and installed with pip, run as a non-root user,
# with the agent's Hermes home mounted at /hermes.
#
#   docker build -t mnemo-ops:latest .
#   docker build -t registry.example/mnemo-ops:0.1 --build-arg MNEMOSYNE="mnemosyne-memory==4.0.0b6" .
#
# No secret goes into the image: the database, the memory blocks, Hermes' auth files and the config
# file all come from the mounted volume (or a mounted config file, MNEMO_OPS_CONFIG) at run time.

FROM python:3.11-slim AS wheel
WORKDIR /src
COPY . .
RUN python -m pip install --no-cache-dir build \
    && python -m build --wheel --outdir /wheels

FROM python:3.11-slim
# The Mnemosyne line the agent runs: the default range takes the newest release (3.15.1 today;
# pip skips pre-releases), so an agent on 4.0 builds with --build-arg MNEMOSYNE="mnemosyne-memory==4.0.0b6".
ARG MNEMOSYNE="mnemosyne-memory>=3.15,<5"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HERMES_HOME=/hermes
COPY --from=wheel /wheels/ /tmp/wheels/
RUN python -m pip install --no-cache-dir /tmp/wheels/mnemo_ops-*.whl "${MNEMOSYNE}" \
    && rm -rf /tmp/wheels \
    && groupadd --system --gid 10001 mnemo \
    && useradd --system --uid 10001 --gid mnemo --home-dir /home/mnemo --create-home mnemo \
    && install -d -o mnemo -g mnemo -m 0700 /hermes \
    && mnemo-ops --version
USER 10001:10001
WORKDIR /home/mnemo
VOLUME ["/hermes"]
# The CronJobs `kubernetes render` writes run `/bin/sh -c` around mnemo-ops (exit 75 counts as
# success); run by hand, the image is mnemo-ops itself.
ENTRYPOINT ["mnemo-ops"]
CMD ["--help"]
