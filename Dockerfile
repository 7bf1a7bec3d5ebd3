# GPU Arena server image: a Hugging Face Docker Space (set `app_port: 8000` in the Space's README
# metadata) or any container host. The port is the one openenv.yaml declares.

# the wheel, with the Rust engine inside it: built offline from Debian's crates (setup.py); where
# they cannot be had the build still succeeds and the Python core plays (`gpu-arena info` says which)
FROM python:3.11-slim AS wheel
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cargo librust-pyo3-dev librust-indexmap-dev \
    || echo "(no Rust toolchain: the image plays on the Python core)"
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md constraints.txt ./
COPY src ./src
COPY native ./native
RUN rm -rf native/target src/gpu_arena/native/gpu_arena_rs*.so \
    && PIP_CONSTRAINT=constraints.txt pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim

# Spaces run the container as uid 1000: give that user a home to install into and write the
# episode store under
RUN useradd --create-home --uid 1000 user
USER user
ENV HOME=/home/user \
    PATH=/home/user/.local/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GPU_ARENA_HOST=0.0.0.0 \
    GPU_ARENA_PORT=8000 \
    GPU_ARENA_DB=/home/user/app/.arena/arena.db
WORKDIR /home/user/app

COPY --chown=user constraints.txt openenv.yaml ./
COPY --chown=user server ./server
COPY --from=wheel /wheels /wheels
# the constraints keep pip from ever resolving a CUDA build of anything
RUN PIP_CONSTRAINT=constraints.txt pip install --user /wheels/*.whl

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"
# one process: sessions live in its memory (never run several uvicorn workers behind one port)
CMD ["gpu-arena", "serve"]
