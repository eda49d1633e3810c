"""`python -m harness.faultproxy --host H --port P [--seed N] [--config FILE]`."""

import sys

from harness.faultproxy.server import main

sys.exit(main())
