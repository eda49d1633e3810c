"""The run folder's contracts: the message and fault logs, the run record and the manifest."""
