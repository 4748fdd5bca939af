"""GIN index on the stored search document, on PostgreSQL only (SQLite searches with LIKE)."""

from django.db import migrations


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "CREATE INDEX IF NOT EXISTS postmortem_search_vector_gin "
        "ON postmortems_postmortem USING gin (search_vector)"
    )


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("DROP INDEX IF EXISTS postmortem_search_vector_gin")


class Migration(migrations.Migration):
    dependencies = [("postmortems", "0001_initial")]

    operations = [migrations.RunPython(create_index, drop_index)]
