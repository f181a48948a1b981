"""Webhook claims get an owner (jobs/claims.py) instead of a deadline.

A claim in progress when the store is upgraded belongs to a deliverer that
has stopped (the upgrade stopped it): it gets an owner that is never alive,
so the next deliverer sends that attempt again, as it would have after the
old deadline.
"""

from django.db import migrations, models

STOPPED_OWNER = "upgraded"


def own_open_claims(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(attempt_claimed_until__isnull=False).only("id", "attempt_claimed_until"):
        Job.objects.filter(id=job.id).update(claim_owner=STOPPED_OWNER, claimed_at=job.attempt_claimed_until)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="claim_owner",
            field=models.CharField(blank=True, db_index=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="claimed_at",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.RunPython(own_open_claims, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name="job",
            name="attempt_claimed_until",
        ),
    ]
