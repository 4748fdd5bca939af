# The Rankscope application image: web, workers and beat all run from it.
FROM python:3.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RANKSCOPE_VAR_DIR=/var/lib/rankscope

RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /home/rankscope rankscope \
    && mkdir -p /var/lib/rankscope && chown rankscope /var/lib/rankscope

WORKDIR /app
COPY requirements.lock ./
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
RUN DJANGO_SECRET_KEY=build-only python manage.py collectstatic --noinput

USER rankscope
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --retries=3 CMD curl -fsS http://127.0.0.1:8000/healthz || exit 1
# Its own control socket path: gunicorn's default ($HOME/.gunicorn/gunicorn.ctl) would be
# shared by every gunicorn run by the same user on a host.
CMD ["gunicorn", "apps.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "4", "--threads", "4", "--timeout", "300", "--access-logfile", "-", "--control-socket", "/var/lib/rankscope/gunicorn.ctl"]
