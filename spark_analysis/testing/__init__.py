"""Test and benchmark infrastructure, not used by a reconcile run: synthetic histories with their
ground truth (synth) and the process of the Spark Connect server the pytest-xdist workers share
(server; its clients' side is spark_analysis.shared_server)."""
