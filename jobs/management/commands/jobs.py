"""`manage.py jobs [JOB_ID] [--full] [--state S]`: list jobs, or show one:
a summary by default, the job as a poll shows it with `--full`."""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from jobs.models import DeliveryAttempt, Job
from jobs.shapes import job_body


class Command(BaseCommand):
    help = "List jobs (newest first) or show one job with its webhook attempts."

    def add_arguments(self, parser):
        parser.add_argument("job_id", nargs="?", help="show this job")
        parser.add_argument("--full", action="store_true", help="with JOB_ID: the whole job as JSON, its result included")
        parser.add_argument("--state", choices=Job.State.values, help="only jobs in this state")
        parser.add_argument("--limit", type=int, default=50)

    def handle(self, *args, job_id: str | None, state: str | None, limit: int, full: bool, **options):
        now = time.time()
        if job_id:
            job = Job.objects.with_id(job_id)
            if job is None:
                raise CommandError(f"No job {job_id}.")
            body = job_body(job, now)
            body["attempt_log"] = list(
                DeliveryAttempt.objects.of_job(job_id).values("number", "outcome", "status_code", "error", "duration_ms")
            )
            self.stdout.write(json.dumps(body, indent=2) if full else summary(body))
            return
        if full:
            raise CommandError("--full shows one job: give its JOB_ID.")
        jobs = Job.objects.in_state(state or None)
        self.stdout.write(f"{'job':16}  {'state':11}  {'mode':7}  {'page':12}  {'status':6}  {'att':3}  plugin")
        for job in jobs[:limit]:
            self.stdout.write(
                f"{job.id:16}  {job.state:11}  {job.mode:7}  {job.page_id:12}  {job.status or '-'!s:6}  {job.attempts:3}  {job.plugin}"
            )


def expires_in(body: dict) -> str:
    """A held job's time left, or that its hold is over and the next sweep removes it."""
    if body.get("expires_in") is None:
        return "-"
    if body["expires_in"] <= 0:
        return "expired, removed at the next sweep"
    return f"{body['expires_in']:.0f} s"


def summary(body: dict) -> str:
    """One job in a screenful: its fields, its progress, the result's size and
    keys (the whole of it with --full), and its webhook attempts."""
    def when(at: float | None) -> str:
        return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))

    result = body.get("result")
    if result is None:
        result_line = "-"
    else:
        keys = ", ".join(list(result)[:8]) + (", …" if len(result) > 8 else "")
        result_line = f"{len(json.dumps(result)):,} bytes of JSON ({keys}); --full shows it"
        if result.get("success") is False:
            result_line = f"error: {result.get('error')}"
    progress = body.get("progress")
    rows = [
        ("job", body["job_id"]),
        ("state", body["state"]),
        ("plugin", f"{body['plugin']} on page {body['page_id']}"),
        ("status", body["status"] if body["status"] is not None else "-"),
        *([("accepted", when(body["accepted_at"]))] if "accepted_at" in body else []),  # a job that waited in line
        ("started", when(body["started_at"])),
        ("finished", when(body["finished_at"])),
        ("expires in", expires_in(body)),
        ("callback", body.get("callback") or "-"),
        ("progress", "-" if not progress else f"{progress['done']} of {progress['total']}: {progress['message'] or ''}".rstrip(": ")),
        ("result", result_line),
    ]
    lines = [f"{name:11} {value}" for name, value in rows]
    for attempt in body["attempt_log"]:
        detail = attempt["status_code"] or attempt["error"] or ""
        lines.append(f"attempt {attempt['number']:<3} {attempt['outcome']:10} {detail!s:20} {attempt['duration_ms'] or 0:.1f} ms")
    return "\n".join(lines)
