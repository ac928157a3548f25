"""A stand-in for karpathy/nanoGPT's train.py: no torch, no data, but its command line
(`--key=value` overrides, as its configurator.py reads them) and its output lines in exactly its
format strings (train.py at commit e2221318e607eb5ee0669d6b7641af25a2111545):
    print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")
It knows nothing of campaignctl: the campaign reads its metrics with `metrics.from_output`.
The loss falls faster with a larger learning rate up to 1e-3 and plateaus higher above it.
"""
import math
import sys
import time

learning_rate, max_iters, eval_interval, log_interval = 6e-4, 500, 250, 10
for arg in sys.argv[1:]:
    key, _, value = arg[2:].partition("=")
    globals()[key] = type(globals()[key])(value)  # configurator.py's override, in one line


def loss_at(lr: float, it: int) -> float:
    rate = lr / 1e-3 if lr <= 1e-3 else 1e-3 / lr
    return 1.45 + 0.5 * abs(math.log10(lr / 1e-3)) + 2.8 * math.exp(-it * rate / 200)


print(f"tokens per iteration will be: {16384:,}")
print("found vocab_size = 65 (inside data/shakespeare_char/meta.pkl)")
print("Initializing a new model from scratch")
print("number of parameters: 10.65M")
running_mfu = -1.0
for iter_num in range(max_iters + 1):
    if iter_num % eval_interval == 0:
        val = loss_at(learning_rate, iter_num)
        print(f"step {iter_num}: train loss {val - 0.05:.4f}, val loss {val:.4f}", flush=True)
        time.sleep(0.5)
    if iter_num % log_interval == 0:
        lossf = loss_at(learning_rate, iter_num) - 0.04
        running_mfu = 0.0360 if iter_num >= 50 else running_mfu
        print(f"iter {iter_num}: loss {lossf:.4f}, time {103.54:.2f}ms, mfu {running_mfu*100:.2f}%", flush=True)
