"""A Hydra app written as Hydra's tutorial writes one (`@hydra.main` over a config directory, a
`log` per step), which trains in steps and checkpoints into its own Hydra output directory: a job
run again in that directory (a retry) resumes where it stopped.

    python my_app.py -m hydra/launcher=lab optimizer.lr=0.1,0.001 seed=0,1,2

loss at step s is (log10(lr) + 3)² + seed / 100 + 1 / s: the best job is lr 0.001, seed 0."""

import logging
import math
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

log = logging.getLogger(__name__)


@hydra.main(version_base=None, config_path="conf", config_name="config")
def my_app(cfg: DictConfig) -> float:
    saved = Path(HydraConfig.get().runtime.output_dir) / "checkpoint.txt"
    start = int(saved.read_text()) + 1 if saved.exists() else 1
    if start > 1:
        log.info(f"resuming from {saved} at step {start}")
    loss = math.inf
    for step in range(start, cfg.train.steps + 1):
        time.sleep(cfg.train.step_s)
        loss = (math.log10(cfg.optimizer.lr) + 3) ** 2 + cfg.seed / 100 + 1 / step
        log.info(f"step {step} loss {loss:.4f}")
        saved.write_text(str(step))
    return loss


if __name__ == "__main__":
    my_app()
