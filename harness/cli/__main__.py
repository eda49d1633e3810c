"""`python -m harness.cli`: the same as `bfh`."""

from harness.cli.main import main

raise SystemExit(main())
