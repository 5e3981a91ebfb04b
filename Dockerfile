# logpipe as a container: `docker run --rm -v "$PWD:/data" -w /data logpipe ingest logs/`
# The wheel is built where a C compiler is (the parsers' C fast lanes, the judged counts'
# and the copies test's C kernels: setup.py), then installed into the slim image.
FROM python:3.11 AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY logpipe ./logpipe
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/logpipe
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --create-home --uid 10001 logpipe

USER 10001
WORKDIR /data
ENTRYPOINT ["logpipe"]
CMD ["--help"]
