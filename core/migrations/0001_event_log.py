"""The event log (issue 56): every published event, kept for a window so an
event socket that reconnects with `?since=<id>` can catch up, and the one
row that keeps the bus's ids from being issued twice across a crash."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="EventRecord",
            fields=[
                ("id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("at", models.FloatField(db_index=True)),
                ("kind", models.CharField(max_length=32)),
                ("page_id", models.CharField(max_length=64, null=True)),
                ("job_id", models.CharField(max_length=16, null=True)),
                ("text", models.TextField()),
            ],
            options={"db_table": "core_event"},
        ),
        migrations.CreateModel(
            name="EventSequence",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                ("reserved", models.BigIntegerField(default=0)),
                ("swept_to", models.BigIntegerField(default=0)),
            ],
            options={"db_table": "core_event_sequence"},
        ),
    ]
