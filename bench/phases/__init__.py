"""The phases of `python -m bench.run`: each measures one thing a user of the
API pays, beside its reference in the same run, and adds its rows to the
report. `requests`: a job's start and a poll against the reference route and
the bare-stack floor; `metrics`: what the metrics cost a request; `delivery`:
a job's end reaching its client (webhook, event socket, a plugin run, the
peer); `memory`: the worker's and the browser's; `store`: recovery, sweep and
restart, on stores of their own."""
