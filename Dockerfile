# GPU Arena server image: a Hugging Face Docker Space (set `app_port: 8000` in the Space's README
# metadata) or any container host. The port is the one openenv.yaml declares.
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

COPY --chown=user pyproject.toml README.md constraints.txt openenv.yaml ./
COPY --chown=user src ./src
COPY --chown=user server ./server
# the constraints keep pip from ever resolving a CUDA build of anything
RUN PIP_CONSTRAINT=constraints.txt pip install --user .

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"
# one process: sessions live in its memory (never run several uvicorn workers behind one port)
CMD ["gpu-arena", "serve"]
