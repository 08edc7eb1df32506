# certgate: certify neural-network classifiers in an MLflow registry (CPU image).
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    MLFLOW_DISABLE_TELEMETRY=true \
    PYTHONUNBUFFERED=1

WORKDIR /opt/certgate
COPY pyproject.toml README.md ./
COPY verifier ./verifier
COPY pipeline_steps ./pipeline_steps
COPY registry_hooks ./registry_hooks
COPY configs ./configs
COPY certgate ./certgate

# The CPU wheel of torch first, so the project's torch range never pulls a CUDA build; then
# the linear credit's compiled loops into their disk cache, so no audit compiles them (`-P`:
# the installed package's, whose cache the `certgate` command reads, not the copy in WORKDIR).
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install ".[dask]" \
    && python -P -m verifier.population.compile_kernels

ENTRYPOINT ["certgate"]
CMD ["--help"]
