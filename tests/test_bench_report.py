"""The benchmark's own plumbing, without running it (benchmarks are not
tests, and no test times anything): its plugin family loads like a user's,
and a run rewrites only its generated block of docs/BENCHMARKS.md."""

from __future__ import annotations

from bench import report as bench_report
from bench.plugins import family
from bench.stats import Latency, percentile


def test_the_bench_family_is_a_plugin_family():
    assert family.name == "bench" and set(family.actions) == {"noop", "hold", "browser-wait"}


def test_percentiles_are_nearest_rank():
    ordered = [float(n) for n in range(1, 101)]
    assert percentile(ordered, 50) == 50 and percentile(ordered, 99) == 99
    assert Latency.of([3.0, 1.0, 2.0]) == Latency(p50=2.0, p99=3.0, mean=2.0, count=3)


def test_a_run_replaces_only_its_block(tmp_path):
    doc = tmp_path / "BENCHMARKS.md"
    report = bench_report.Report(bench_report.QUICK, rows=[bench_report.Row("Reference", "p50 1 ms")], notes=["Date: then."])
    bench_report.write(report, doc)
    doc.write_text("# Benchmarks\n\nWhat we changed.\n\n" + doc.read_text().split("\n\n", 1)[1] + "\nAfter.\n")
    report.rows = [bench_report.Row("Reference", "p50 2 ms", target="≤ 1", met=False)]
    bench_report.write(report, doc)
    text = doc.read_text()
    assert "What we changed." in text and text.rstrip().endswith("After.")
    assert "p50 2 ms" in text and "p50 1 ms" not in text and "**no**" in text
    assert text.count(bench_report.BEGIN) == 1 and text.count(bench_report.END) == 1
