"""The pytest plugin: options, fixtures, the conformance catalog as test items, the default suite."""
