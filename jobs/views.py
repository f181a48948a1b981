"""`GET /api/v1/jobs/{job_id}`: poll a job."""

from __future__ import annotations

import re
import time

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse

from jobs.service import find_live_job, job_body
from penelope_site.api import ApiError, api_view, json_response

JOB_ID = re.compile(r"[0-9a-f]{16}")


@api_view("GET")
async def poll(request: HttpRequest, job_id: str) -> HttpResponse:
    now = time.time()
    job = await sync_to_async(find_live_job)(job_id, now) if JOB_ID.fullmatch(job_id) else None
    if job is None:
        raise ApiError(404, "No such job: the id is unknown, or its result was delivered or has expired.")
    return json_response(job_body(job, now))
