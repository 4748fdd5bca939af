import os

from django.core.wsgi import get_wsgi_application

from apps.lib.requestbody import RequestBodyMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")
# Bodies are read with a deadline and in full (see apps.lib.requestbody).
application = RequestBodyMiddleware(get_wsgi_application())
