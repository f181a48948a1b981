"""`manage.py jobs [JOB_ID] [--state S]`: list jobs, or show one as a poll would."""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from jobs.models import DeliveryAttempt, Job
from jobs.shapes import job_body


class Command(BaseCommand):
    help = "List jobs (newest first) or show one job with its webhook attempts."

    def add_arguments(self, parser):
        parser.add_argument("job_id", nargs="?", help="show this job")
        parser.add_argument("--state", choices=Job.State.values, help="only jobs in this state")
        parser.add_argument("--limit", type=int, default=50)

    def handle(self, *args, job_id: str | None, state: str | None, limit: int, **options):
        now = time.time()
        if job_id:
            job = Job.objects.filter(id=job_id).first()
            if job is None:
                raise CommandError(f"No job {job_id}.")
            body = job_body(job, now)
            body["attempt_log"] = list(
                DeliveryAttempt.objects.filter(job_id=job_id).values("number", "outcome", "status_code", "error", "duration_ms")
            )
            self.stdout.write(json.dumps(body, indent=2))
            return
        jobs = Job.objects.all()
        if state:
            jobs = jobs.filter(state=state)
        self.stdout.write(f"{'job':16}  {'state':11}  {'mode':7}  {'page':12}  {'status':6}  {'att':3}  plugin")
        for job in jobs[:limit]:
            self.stdout.write(
                f"{job.id:16}  {job.state:11}  {job.mode:7}  {job.page_id:12}  {job.status or '-'!s:6}  {job.attempts:3}  {job.plugin}"
            )
