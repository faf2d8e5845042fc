"""The portal's own cordon: a node whose GPUs are all out takes no new pods (pure rule, no rows)."""

from __future__ import annotations


def cordon_wanted(
    *, offered: list[bool], desired: bool | None, health_cordoned: bool
) -> tuple[bool | None, bool]:
    """Pure: the node's (desired_cordoned, health_cordoned) after its GPUs' offer changed. All out:
    cordon, unless operators cordoned it already (then their cordon stands and is theirs to lift).
    One back: lift only the portal's own cordon."""
    if offered and not any(offered):
        if desired is True and not health_cordoned:
            return desired, False
        return True, True
    if health_cordoned:
        return False, False
    return desired, health_cordoned
