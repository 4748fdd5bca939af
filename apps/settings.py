"""Rankscope settings, read from environment variables.

Every default works for the embedded mode (one machine, nothing to install but
Python): SQLite and files under ``var/``, a Celery broker that needs no server.
``DATABASE_URL`` switches to PostgreSQL, ``CELERY_BROKER_URL`` to Redis,
``RANKSCOPE_STORAGE=s3`` to S3-compatible object storage. A malformed value stops
start-up with a message naming the variable (see ``apps.lib.env``).
"""

from __future__ import annotations

import secrets
from pathlib import Path

import dj_database_url
import plotly

from apps.lib.env import (
    SettingError,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("RANKSCOPE_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    key = env_str("DJANGO_SECRET_KEY", "")
    if key:
        return key
    # Embedded mode: one key per installation, kept across restarts so sessions survive.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("RANKSCOPE_BEHIND_TLS_PROXY", False) else None
)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("RANKSCOPE_SECURE_COOKIES", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "apps.accounts",
    "apps.incidents",
    "apps.ingest",
    "apps.analysis",
    "apps.investigation",
    "apps.postmortems",
    "apps.api",
    "apps.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "apps.api.errors.ApiJsonErrorsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "apps.lib.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "apps.urls"
WSGI_APPLICATION = "apps.wsgi.application"
ASGI_APPLICATION = "apps.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "builtins": ["django.templatetags.static"],
        },
    }
]

# --- Database -----------------------------------------------------------------
_SQLITE_DEFAULT = f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
_database_url = env_url(
    "DATABASE_URL",
    _SQLITE_DEFAULT,
    schemes=("sqlite", "postgres", "postgresql", "pgsql"),
)
try:
    _db = dj_database_url.parse(_database_url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60))
except Exception:
    raise SettingError("DATABASE_URL", _database_url, "a database URL") from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and the worker write to the same file: WAL lets readers run beside
    # one writer, and IMMEDIATE transactions wait for the lock instead of failing.
    _db["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    _db["CONN_MAX_AGE"] = 0
else:
    _db["CONN_HEALTH_CHECKS"] = True
    _db.setdefault("TEST", {})["NAME"] = env_str("DATABASE_TEST_NAME", "") or None
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "incidents:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- Static files and storage --------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Front-end libraries come from installed packages (htmx from django-htmx, plotly.js
# from plotly), never from a CDN: clusters are often air-gapped.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/plotly", Path(plotly.__file__).parent / "package_data"),
]
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = VAR_DIR / "media"

_storage = env_choice("RANKSCOPE_STORAGE", "filesystem", choices=("filesystem", "s3"))
if _storage == "filesystem":
    _default_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT)},
    }
else:  # s3
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("RANKSCOPE_S3_BUCKET", "rankscope"),
            "endpoint_url": env_str("RANKSCOPE_S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("RANKSCOPE_S3_REGION", "") or None,
            "access_key": env_str("RANKSCOPE_S3_ACCESS_KEY_ID", "") or None,
            "secret_key": env_str("RANKSCOPE_S3_SECRET_ACCESS_KEY", "") or None,
            "location": env_str("RANKSCOPE_S3_PREFIX", "artifacts"),
            "file_overwrite": False,
            "default_acl": None,
        },
    }
# S3 writes stream in parts of this size: one part is in memory per upload at a time.
RANKSCOPE_S3_PART_BYTES = env_int("RANKSCOPE_S3_PART_BYTES", 16 * 1024**2, minimum=5 * 1024**2)
# The auditor aborts multipart uploads begun this long ago and never finished (the
# process writing them was killed): S3 bills their parts and never shows them.
RANKSCOPE_S3_ABORT_UPLOADS_AFTER_SECONDS = env_int(
    "RANKSCOPE_S3_ABORT_UPLOADS_AFTER_SECONDS", 6 * 3600, minimum=60
)
STORAGES = {
    "default": _default_storage,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Uploads larger than this go to a temporary file rather than memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
DATA_UPLOAD_MAX_NUMBER_FILES = env_int("RANKSCOPE_MAX_FILES_PER_REQUEST", 2048, minimum=1)
# A request body that sends nothing for this many seconds is abandoned (400, nothing
# stored), so stalled clients cannot hold every web server thread (apps.lib.requestbody).
RANKSCOPE_REQUEST_BODY_TIMEOUT = env_float("RANKSCOPE_REQUEST_BODY_TIMEOUT", 30.0, minimum=0)
FILE_UPLOAD_TEMP_DIR = str(VAR_DIR / "tmp")
Path(FILE_UPLOAD_TEMP_DIR).mkdir(parents=True, exist_ok=True)

# Limits on what one upload may hold (checked before bytes are stored).
RANKSCOPE_MAX_FILE_BYTES = env_int("RANKSCOPE_MAX_FILE_BYTES", 4 * 1024**3, minimum=1)
RANKSCOPE_ARCHIVE_MAX_TOTAL_BYTES = env_int(
    "RANKSCOPE_ARCHIVE_MAX_TOTAL_BYTES", 32 * 1024**3, minimum=1
)
RANKSCOPE_ARCHIVE_MAX_MEMBERS = env_int("RANKSCOPE_ARCHIVE_MAX_MEMBERS", 20_000, minimum=1)
RANKSCOPE_ARCHIVE_MAX_RATIO = env_float("RANKSCOPE_ARCHIVE_MAX_RATIO", 200.0, minimum=1.0)
# The largest request body the API and the upload form accept (413 before bytes move);
# by default the largest expanded archive.
RANKSCOPE_API_MAX_REQUEST_BYTES = env_int(
    "RANKSCOPE_API_MAX_REQUEST_BYTES", RANKSCOPE_ARCHIVE_MAX_TOTAL_BYTES, minimum=1
)
# Stored objects no artifact row points at (an upload whose row could not be written)
# are deleted by the storage sweep once they are this old.
RANKSCOPE_STORAGE_SWEEP_GRACE_SECONDS = env_int(
    "RANKSCOPE_STORAGE_SWEEP_GRACE_SECONDS", 3600, minimum=60
)

# --- Cache (rate limits and locks must be shared by every process) ------------
_cache_url = env_url("CACHE_URL", "", schemes=("redis", "rediss", "file"))
if _cache_url.startswith("redis"):
    # Bounded waits: a Redis that stops answering must not hold a web request (what uses
    # the cache fails open, see apps.lib.sharedcache).
    _cache_timeout = env_float("RANKSCOPE_CACHE_TIMEOUT_SECONDS", 2.0, minimum=0.1)
    CACHES = {
        "default": {
            "BACKEND": "apps.lib.rediscache.RedisCache",
            "LOCATION": _cache_url,
            "OPTIONS": {
                "socket_connect_timeout": _cache_timeout,
                "socket_timeout": _cache_timeout,
            },
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

# --- Celery ---------------------------------------------------------------------
CELERY_BROKER_URL = env_url(
    "CELERY_BROKER_URL", "filesystem://", schemes=("filesystem", "redis", "rediss", "memory")
)
_broker_dir = VAR_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem"):
    for sub in ("queue", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # how often an idle worker looks for new task files; kombu's default (1 s) lets a
        # two-process worker start two parses a second: a 256-file upload waited two minutes
        # for its verdict in the embedded mode
        "polling_interval": env_float("CELERY_FILESYSTEM_POLL_SECONDS", 0.1, minimum=0.01),
    }
else:
    # Above the longest hard time limit, so a slow task is never handed to a second
    # worker while the first one still runs it.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 2 * 3600, minimum=60),
        # A dead or unreachable Redis is noticed in seconds, by producers and workers.
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
    }
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 3000, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3600, minimum=1)
# A running parse touches its row's heartbeat this often; the auditor re-sends a parse
# whose heartbeat went quiet this long (its worker died), and one whose row stayed
# "queued" this long (its message was lost with Redis).
RANKSCOPE_PARSE_HEARTBEAT_SECONDS = env_float(
    "RANKSCOPE_PARSE_HEARTBEAT_SECONDS", 10.0, minimum=0.1
)
RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS = env_int(
    "RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS", 60, minimum=1
)
if RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS < 2 * RANKSCOPE_PARSE_HEARTBEAT_SECONDS:
    # Otherwise a live parse between two beats would look dead and be sent again.
    raise SettingError(
        "RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS",
        str(RANKSCOPE_PARSE_HEARTBEAT_STALE_SECONDS),
        f"at least twice RANKSCOPE_PARSE_HEARTBEAT_SECONDS ({RANKSCOPE_PARSE_HEARTBEAT_SECONDS:g})",
    )
RANKSCOPE_PARSE_QUEUED_SECONDS = env_int("RANKSCOPE_PARSE_QUEUED_SECONDS", 90, minimum=1)
# The auditor (Celery beat) runs this often. With the values below, work lost with a
# killed worker or with Redis is re-sent within about two minutes.
RANKSCOPE_AUDIT_SECONDS = env_float("RANKSCOPE_AUDIT_SECONDS", 30.0, minimum=1)
# An analysis queued this long while its queue is empty (its message was lost) is re-sent;
# one whose heartbeat went quiet this long (its worker died) is re-queued.
RANKSCOPE_ANALYSIS_QUEUED_SECONDS = env_int("RANKSCOPE_ANALYSIS_QUEUED_SECONDS", 90, minimum=1)
RANKSCOPE_ANALYSIS_STALE_SECONDS = env_int("RANKSCOPE_ANALYSIS_STALE_SECONDS", 60, minimum=1)
# A running analysis touches its row's heartbeat this often, even inside one long analyzer.
RANKSCOPE_ANALYSIS_HEARTBEAT_SECONDS = env_float(
    "RANKSCOPE_ANALYSIS_HEARTBEAT_SECONDS", 10.0, minimum=0.1
)
if RANKSCOPE_ANALYSIS_STALE_SECONDS < 2 * RANKSCOPE_ANALYSIS_HEARTBEAT_SECONDS:
    # Otherwise a live analysis between two beats would look dead and be re-queued.
    raise SettingError(
        "RANKSCOPE_ANALYSIS_STALE_SECONDS",
        str(RANKSCOPE_ANALYSIS_STALE_SECONDS),
        "at least twice RANKSCOPE_ANALYSIS_HEARTBEAT_SECONDS"
        f" ({RANKSCOPE_ANALYSIS_HEARTBEAT_SECONDS:g})",
    )
# The analysis task's own limits (an analysis of thousands of ranks may need longer than
# a parse); by default the Celery task limits.
RANKSCOPE_ANALYSIS_SOFT_TIME_LIMIT = env_int(
    "RANKSCOPE_ANALYSIS_SOFT_TIME_LIMIT", CELERY_TASK_SOFT_TIME_LIMIT, minimum=1
)
RANKSCOPE_ANALYSIS_TIME_LIMIT = env_int(
    "RANKSCOPE_ANALYSIS_TIME_LIMIT", CELERY_TASK_TIME_LIMIT, minimum=1
)
for _soft, _hard, _name in (
    (CELERY_TASK_SOFT_TIME_LIMIT, CELERY_TASK_TIME_LIMIT, "CELERY_TASK_SOFT_TIME_LIMIT"),
    (
        RANKSCOPE_ANALYSIS_SOFT_TIME_LIMIT,
        RANKSCOPE_ANALYSIS_TIME_LIMIT,
        "RANKSCOPE_ANALYSIS_SOFT_TIME_LIMIT",
    ),
):
    if _soft >= _hard:
        # The soft limit is what lets a task record why it stopped; past the hard one it
        # is killed without a word.
        raise SettingError(_name, str(_soft), f"fewer seconds than the hard time limit ({_hard})")
# Files still pending (never handed to the queue: the broker was down) this long after
# their upload are sent by the auditor.
RANKSCOPE_ANALYSIS_PENDING_ARTIFACT_SECONDS = env_int(
    "RANKSCOPE_ANALYSIS_PENDING_ARTIFACT_SECONDS", 60, minimum=0
)
_visibility = CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout")
_longest_task = max(CELERY_TASK_TIME_LIMIT, RANKSCOPE_ANALYSIS_TIME_LIMIT)
if _visibility is not None and _visibility <= _longest_task:
    # Otherwise Redis hands a slow task to a second worker while the first still runs it.
    raise SettingError(
        "CELERY_VISIBILITY_TIMEOUT",
        str(_visibility),
        "more seconds than the longest hard time limit"
        f" (CELERY_TASK_TIME_LIMIT / RANKSCOPE_ANALYSIS_TIME_LIMIT: {_longest_task})",
    )
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker keeps reconnecting through a broker outage of any length (Celery's default
# gives up after 100 attempts and the worker exits).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_ROUTES = {
    "apps.ingest.tasks.*": {"queue": "ingest"},
    "apps.analysis.tasks.*": {"queue": "analysis"},
}
CELERY_BEAT_SCHEDULE: dict = {
    "analysis-audit": {
        "task": "apps.analysis.tasks.analysis_audit",
        "schedule": RANKSCOPE_AUDIT_SECONDS,
    },
    "ingest-storage-sweep": {
        "task": "apps.ingest.tasks.artifact_storage_sweep",
        "schedule": 3600.0,
    },
}

# --- REST API -----------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "apps.api.permissions.TokenScope",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["apps.api.throttling.TokenBucketThrottle"],
    "EXCEPTION_HANDLER": "apps.api.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "apps.api.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 50,
}
# Per-token token bucket: the burst must cover every node of the largest job posting at once.
RANKSCOPE_API_BURST = env_int("RANKSCOPE_API_BURST", 2048, minimum=1)
RANKSCOPE_API_RATE = env_float("RANKSCOPE_API_RATE", 50.0, minimum=0.001)
SPECTACULAR_SETTINGS = {
    "TITLE": "Rankscope API",
    "DESCRIPTION": "Incidents, artifacts, analyses and post-mortems of distributed training jobs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apps.api.schema.require_request_bodies",
    ],
    "ENUM_NAME_OVERRIDES": {
        "IncidentStatusEnum": "apps.incidents.models.Status",
        "UploadStatusEnum": ["stored", "duplicate", "rejected"],
    },
}

# --- Product defaults -------------------------------------------------------------
RANKSCOPE_DEFAULT_GPU_HOUR_USD = env_float("RANKSCOPE_DEFAULT_GPU_HOUR_USD", 4.0, minimum=0)
# API/SLURM uploads: analyse once no new file has arrived for this long (debounce).
RANKSCOPE_ANALYSIS_SETTLE_SECONDS = env_float("RANKSCOPE_ANALYSIS_SETTLE_SECONDS", 30.0, minimum=0)
# Uploads quiet for the settle time plus this long, with no analysis of them: their
# settle check was lost (with Redis or a worker); the auditor requests the analysis.
RANKSCOPE_ANALYSIS_SETTLE_GRACE_SECONDS = env_int(
    "RANKSCOPE_ANALYSIS_SETTLE_GRACE_SECONDS", 30, minimum=0
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice(
            "RANKSCOPE_LOG_LEVEL", "INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
        ),
    },
}
