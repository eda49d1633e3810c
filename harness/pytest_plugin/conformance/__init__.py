"""The conformance catalog as pytest items: test_catalog.py, collected by the pytest plugin
(harness.pytest_plugin.plugin adds this folder to the session) or imported by a test file."""
