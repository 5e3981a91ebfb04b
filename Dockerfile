# logpipe as a container: `docker run --rm -v "$PWD:/data" -w /data logpipe ingest logs/`
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    LOGPIPE_SCHEMAS=/opt/logpipe/schemas

WORKDIR /opt/logpipe
COPY pyproject.toml README.md ./
COPY logpipe ./logpipe
COPY schemas ./schemas
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 logpipe

USER 10001
WORKDIR /data
ENTRYPOINT ["logpipe"]
CMD ["--help"]
