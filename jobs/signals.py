"""What the jobs app tells whoever listens, as Django signals: the worker's
start-up (worker/setup.py) connects the webhook deliverer to them."""

from django.dispatch import Signal

# A webhook job has ended and waits for its first delivery (sender: the job's id).
webhook_ready = Signal()
