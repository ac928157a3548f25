"""A task that really uses memory: allocate MB megabytes, touch every page (so it is resident:
sacct MaxRSS and the sampler see it), hold it SECONDS, exit 0."""
import sys
import time

block = bytearray(int(sys.argv[1]) * 2**20)
for i in range(0, len(block), 4096):
    block[i] = 1
time.sleep(float(sys.argv[2]))
