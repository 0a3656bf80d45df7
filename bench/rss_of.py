"""Run a command; print its peak resident set size in KiB on stderr's last line."""

import resource
import subprocess
import sys

done = subprocess.run(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(done.returncode)
