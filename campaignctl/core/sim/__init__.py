"""A discrete-event simulation of a Slurm cluster running one campaign under a policy. Pure.

- workload.py: what each task really needs (memory, run time, failures), drawn from a seed or a trace;
- cluster.py: nodes, GPU types and partitions (the default shape from the campaign's resources);
- scheduler.py: Slurm's queue: priority, EASY backfill, array throttles, holds, preemption;
- engine.py: the event loop: submissions, starts, ends, node failures, and the policy's tick;
- driver.py: the tick itself, through `decide_tick` (and the attempt-scaled baseline);
- tally.py: what a run adds up to.
docs/simulate.md says what is modelled and what is not."""
