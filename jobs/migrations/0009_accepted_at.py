"""A job's acceptance and its start apart (issue 41): `accepted_at` is when
its row was stored and its 202 answered; `started_at` when it first took a
page, null until then; `attempt_started_at` when the attempt running (or run
last) took its page. The job list reads newest accepted first.

Before, `started_at` was the acceptance until a queued job took its page,
then the start of the attempt running or run last. Each row stored then is
read as follows:

- Its start equals its `enqueued_at` and it has no past attempts: it was
  stored queued and never took a page (taking one would have moved its
  start). Accepted then; not started.
- It has past attempts (X-Retry): it started with its first attempt, which is
  also the earliest acceptance the row still knows; its attempt started at
  its old start.
- Any other: accepted at its `enqueued_at` when it was stored queued, else at
  its start; its start, and its attempt's, stay as they were.

Going back, `started_at` is again the attempt's start, or the acceptance of
a job that never started.
"""

from django.db import migrations, models

BATCH_ROWS = 500


def accept_and_start(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    rows = Job.objects.only("id", "started_at", "enqueued_at", "past_attempts")
    changed = []
    for job in rows.iterator(chunk_size=BATCH_ROWS):
        old_start = job.started_at
        never_started = not job.past_attempts and job.enqueued_at is not None and old_start == job.enqueued_at
        if never_started:
            job.accepted_at, job.started_at, job.attempt_started_at = job.enqueued_at, None, None
        elif job.past_attempts:
            first_start = job.past_attempts[0]["started_at"]
            job.accepted_at, job.started_at, job.attempt_started_at = first_start, first_start, old_start
        else:
            job.accepted_at = job.enqueued_at if job.enqueued_at is not None else old_start
            job.attempt_started_at = old_start
        changed.append(job)
    Job.objects.bulk_update(changed, ["accepted_at", "started_at", "attempt_started_at"], batch_size=BATCH_ROWS)


def start_as_before(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(attempt_started_at__isnull=False).update(started_at=models.F("attempt_started_at"))
    Job.objects.filter(attempt_started_at__isnull=True).update(started_at=models.F("accepted_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0008_debug_and_family_version"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="accepted_at",
            field=models.FloatField(null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="attempt_started_at",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="job",
            name="started_at",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.RunPython(accept_and_start, start_as_before),
        migrations.AlterField(
            model_name="job",
            name="accepted_at",
            field=models.FloatField(),
        ),
        migrations.RemoveIndex(
            model_name="job",
            name="jobs_newest",
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["accepted_at", "id"], name="jobs_newest"),
        ),
        migrations.AlterModelOptions(
            name="job",
            options={"ordering": ["-accepted_at", "-id"]},
        ),
    ]
