"""What the tests and the benchmarks share: a real worker started in a subprocess
(`harness.worker`) and a webhook receiver on loopback (`harness.receiver`)."""
