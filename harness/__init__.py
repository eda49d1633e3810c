"""Broker-failover chaos test harness (library)."""

__version__ = "0.1.0"
