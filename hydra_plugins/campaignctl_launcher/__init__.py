"""campaignctl's Hydra launcher: `python app.py -m hydra/launcher=campaignctl …` submits the sweep
as one campaign and returns at once (campaignctl/services/hydra_sweep.py). Hydra finds it by
importing every module under the `hydra_plugins` namespace package."""
