"""One run: the environment, the run loop, hand-driven runs and rounds."""
