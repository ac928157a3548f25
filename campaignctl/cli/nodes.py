from __future__ import annotations

from typing import Annotated

import typer

from campaignctl.cli.common import JsonOption, console, plain_table, print_json

ClusterOption = Annotated[str | None, typer.Option("--cluster", help="The cluster (default: slurm.conf's ClusterName).",
                                                   show_default=False)]

nodes_app = typer.Typer(
    name="nodes",
    help="The node ledger: nodes that failed or slowed campaigns on this cluster, yours and your "
         "team's, what each did, and until when new arrays leave them out (docs/nodes.md).\n\n"
         "Example: campaignctl nodes --json",
    invoke_without_command=True,
)


@nodes_app.callback()
def nodes(
    ctx: typer.Context,
    cluster: ClusterOption = None,
    policy: Annotated[str, typer.Option("--policy", help="Score with this policy's `nodes:` rules (a built-in "
                                        "name or a policy file); each campaign's ticks use its own.")] = "default",
    json_out: JsonOption = False,
) -> None:
    """Every node the ledger remembers: state (excluded, probation, watched), score, evidence,
    since, expires, the campaigns the evidence came from.

    Example: campaignctl nodes --policy policies/site.yaml
    """
    if ctx.invoked_subcommand is not None:
        return
    from campaignctl.services.nodes import node_ledger

    result = node_ledger(cluster, policy)
    if json_out:
        print_json("nodes", result.to_dict())
        return
    table = plain_table("node", "state", "score", "evidence", "since", "expires", wrapping=("campaigns",))
    for n in result.nodes:
        evidence = ", ".join(f"{k} ×{c}" if c > 1 else k for k, c in sorted(n.evidence.items()))
        table.add_row(n.node, n.state, f"{n.score:g}", evidence, n.since, n.expires or "-", ", ".join(n.campaigns))
    console.print(table if result.nodes else f"the ledger of cluster {result.cluster} remembers no node")


@nodes_app.command("forgive")
def forgive(
    node: Annotated[str, typer.Argument(help="The node, as sinfo names it.", show_default=False)],
    reason: Annotated[str, typer.Option("--reason", help="Why (kept in the ledger).")] = "",
    cluster: ClusterOption = None,
    json_out: JsonOption = False,
) -> None:
    """Wipe a node's slate: new arrays may use it again at once. Written to the ledger with your
    name and the reason; the node's earlier evidence no longer counts.

    Example: campaignctl nodes forgive node3 --reason "GPU replaced"
    """
    from campaignctl.services.nodes import forgive as forgive_node

    name = forgive_node(node, reason, cluster)
    if json_out:
        print_json("nodes forgive", {"cluster": name, "node": node, "reason": reason})
        return
    console.print(f"{node} forgiven on cluster {name}: new arrays may use it again")
