# The vertexdist training image: the bundled trainer (or your package, see TRAINER_PACKAGE) on a prebuilt
# Vertex AI PyTorch GPU image, with the Reduction Server NCCL plugin so the image works with reducers.
# Facts used: docs/reference/vertex.md §3.3 (prebuilt images, only :latest is supported) and §2.3 (custom images
# need NCCL >= 2.7 plus the `google-reduction-server` apt package for Reduction Server).
#
#   docker build --build-arg BASE_IMAGE=... --build-arg PIP_REQUIREMENTS="pandas==2.2.2" .
#   vertexdist build TEMPLATE      (passes the template's build_args and trainer.requirements)
ARG BASE_IMAGE=us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest
FROM ${BASE_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Reduction Server NCCL plugin. The prebuilt images may ship it already; then the apt sources are left as
# they are, since a second entry for the same repository with another key makes apt refuse to run. Where its
# repository cannot be reached from the build (an offline machine building on vertexdist's local stand-in base,
# which has no curl either), the step is skipped with a message, as for CPU images: reducers need GPUs anyway.
# The plugin's version follows the repository (Google publishes no pinned versions), hence DL3008.
# hadolint ignore=DL3008
RUN if dpkg -s google-reduction-server >/dev/null 2>&1; then \
      echo "Reduction Server plugin: already in the base image"; \
    elif ! command -v curl >/dev/null 2>&1 || ! command -v gpg >/dev/null 2>&1 \
         || ! curl -fsSL --max-time 30 -o /tmp/google-fast-socket.key https://packages.cloud.google.com/apt/doc/apt-key.gpg; then \
      echo "Reduction Server plugin skipped: its repository (packages.cloud.google.com) cannot be reached from this build"; \
    else \
      { grep -rqs google-fast-socket /etc/apt/sources.list /etc/apt/sources.list.d/ \
        || { gpg --dearmor --yes -o /usr/share/keyrings/google-fast-socket.gpg /tmp/google-fast-socket.key \
             && echo "deb [signed-by=/usr/share/keyrings/google-fast-socket.gpg] https://packages.cloud.google.com/apt google-fast-socket main" \
               > /etc/apt/sources.list.d/google-fast-socket.list; }; } \
      && rm -f /tmp/google-fast-socket.key \
      && apt-get update \
      && apt-get install -y --no-install-recommends google-reduction-server \
      && rm -rf /var/lib/apt/lists/*; \
    fi

# A fixed high uid: base images may already use 1000 for their own user. USER takes the number, which
# resolves the same on every host.
RUN useradd --create-home --uid 10001 --user-group --shell /bin/bash trainer

# Dependencies before code, so a code change rebuilds only the last layers (seconds).
# PIP_REQUIREMENTS: space-separated pip requirements (vertexdist passes the template's trainer.requirements).
ARG PIP_REQUIREMENTS=""
RUN if [ -n "${PIP_REQUIREMENTS}" ]; then \
      echo "${PIP_REQUIREMENTS}" | tr ' ' '\n' > /tmp/requirements.txt \
      && pip install --no-cache-dir --requirement /tmp/requirements.txt \
      && rm /tmp/requirements.txt; \
    fi

# The code layer. TRAINER_PACKAGE is the package folder in the build context; the entrypoint runs the
# bundled trainer, and a template with its own package sets its module as the container command.
# The shipped launcher (standard library only) goes beside it: `launcher: torchrun` templates run
# `python -m vertexdist_launcher torchrun ... -- -m <module>` as the container command.
ARG TRAINER_PACKAGE=trainer_pkg
WORKDIR /app
COPY vertexdist/shipped/vertexdist_launcher/ /app/vertexdist_launcher/
COPY ${TRAINER_PACKAGE}/ /app/${TRAINER_PACKAGE}/
ENV PYTHONPATH=/app \
    PYTHONUNBUFFERED=1

USER 10001
ENTRYPOINT ["python", "-m", "trainer_pkg.task"]
