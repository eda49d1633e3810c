"""Agents under test: the reference agent, seeded-defect variants and adapters."""
