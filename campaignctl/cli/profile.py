from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from campaignctl.cli.common import JsonOption, console, plain_table, print_json

if TYPE_CHECKING:
    from campaignctl.core.packing.profile_stats import Spread
    from campaignctl.services.profiles import ProfileShow

profile_app = typer.Typer(
    name="profile",
    help="Profiles: a kind of work (a spec's `profile:` key) and what its ended attempts used, "
         "which the policy's right_size section sizes new work from.\n\n"
         "Example: campaignctl profile show nanogpt-small",
    no_args_is_help=True,
)


@profile_app.command("list")
def list_(json_out: JsonOption = False) -> None:
    """Every profile a campaign names: its campaigns, ended attempts (samples), and how many
    attempts right_size sized and how many of those then ran out of memory or time (wrong).

    Example: campaignctl profile list
    """
    from campaignctl.services.profiles import list_profiles

    result = list_profiles()
    if json_out:
        print_json("profile list", result.to_dict())
        return
    table = plain_table("profile", "samples", "right-sized", "wrong", wrapping=("campaigns",))
    for p in result.profiles:
        table.add_row(p.name, str(p.samples), str(p.right_sized), str(p.wrong), ", ".join(p.campaigns))
    console.print(table if result.profiles else "no profiles yet: name one with `profile:` in a spec")


@profile_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Profile name.", show_default=False)],
    json_out: JsonOption = False,
) -> None:
    """A profile's distribution per group (rung, and the parameters `profile.by` names): peak RSS,
    elapsed time, GPU memory peak and CPU use as p50/p95/max; then per campaign what was asked
    against what was used, and what right_size (its default section) would ask now.

    Example: campaignctl profile show nanogpt-small --json
    """
    from campaignctl.services.profiles import show_profile

    result = show_profile(name)
    if json_out:
        print_json("profile show", result.to_dict())
    else:
        render(result)


def render(result: ProfileShow) -> None:
    table = Table("group", "samples", "peak RSS MB", "elapsed s", "GPU mem MB", "CPU %", "right-sized", "wrong",
                  title=f"profile {result.name} (p50 / p95 / max)")
    for g in result.groups:
        table.add_row(g.group, str(g.samples), _spread(g.rss_mb), _spread(g.elapsed_s), _spread(g.gpu_mem_mb),
                      _spread(g.cpu_pct), str(g.right_sized), str(g.wrong))
    console.print(table)
    s = result.section
    use = Table("campaign", "group", "attempts", "asked mem/time/cpus/gpus", "used RSS p95 / time p95 / cpus / GPU mem",
                f"right_size would ask (q{s.mem.quantile}×{s.mem.margin}, q{s.time.quantile}×{s.time.margin})",
                title="requested vs used")
    for c in result.campaigns:
        would = f"{c.would_ask_mem_mb}M / {c.would_ask_time_min} min" if c.would_ask_mem_mb else \
            f"- (under {s.min_samples} samples)"
        use.add_row(c.campaign, c.group, str(c.attempts),
                    f"{c.asked_mem_mb}M / {c.asked_time_min} min / {c.asked_cpus} / {c.asked_gpus}",
                    f"{_num(c.used_rss_p95_mb, 'M')} / {_num(c.used_elapsed_p95_s, ' s')} / "
                    f"{_num(c.used_cpus, '')} / {_num(c.used_gpu_mem_p95_mb, 'M')}", would)
    console.print(use)


def _spread(s: Spread | None) -> str:
    return "-" if s is None else f"{s.p50:g} / {s.p95:g} / {s.max:g}"


def _num(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:g}{unit}"
