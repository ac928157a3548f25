"""What answers an attempt and what ends a task, in the decision log's words: each defined here
once, read by the tick, replay, the simulator and the log's own queries."""

from __future__ import annotations

# An attempt that ended is answered for good by one of these, at most once (the log's unique
# index on an attempt's enforced answer: two ticks never both retry it).
ANSWERS = ("resubmit", "give_up")
# A task ends for good with one of these (stop: early stopping, or a person's cancel).
SETTLING = ("give_up", "stop")
# What acts on an attempt: its tick does not decide on it again.
ACTING = (*ANSWERS, "stop")
