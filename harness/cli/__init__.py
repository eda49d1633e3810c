"""`bfh`: the command line and the commands it starts (demo, doctor, the supervisor of `bfh up`)."""
