"""What ``liminal inspect`` prints of any CLI's session after its facts: the turns by band, what
the gradient would leave, the largest items (each CLI's report gives them as data)."""

from __future__ import annotations

from typing import Any

from liminal.units import tokens


def bands_and_largest(data: dict[str, Any], item: str) -> list[str]:
    """The rows: ``data["bands"]``, ``planned_tokens``, ``target_tokens`` and ``largest`` (each
    ``{item: n, "kind", "tokens"}``; ``item`` names what ``n`` counts: a line, a message)."""
    out = ["", f"{'band':<10}{'turns':>7}{'tokens now':>12}"]
    for name, band in data["bands"].items():
        out.append(f"{name:<10}{band['turns']:>7}{band['tokens']:>12,}")
    out.append(f"after the gradient: about {tokens(data['planned_tokens'])} tokens "
               f"(target {tokens(data['target_tokens'])})")
    out += ["", f"{item:>7}  {'tokens':>8}  what"]
    out += [f"{i[item]:>7}  {i['tokens']:>8,}  {i['kind']}" for i in data["largest"]]
    return out
