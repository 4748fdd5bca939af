"""What the engine claims must agree with its own verdict, on every generated scenario.

A rank the verdict calls the culprit (it crashed, stalled or never joined) cannot also be
one that "entered the collective"; and what the engine itself calls noise (retries that
recovered) is never offered as a contributing factor of the proposed Five Whys.
"""

from __future__ import annotations

import re

import pytest

from rankscope.testing.generate import SCENARIOS

from .conftest import Jobs

ENTERED = re.compile(r"\bentered\b", re.I)
NEVER = re.compile(r"\bnever entered\b|\bnot entered\b|\bdid not enter\b", re.I)
EVERY = re.compile(r"\b(?:every|all) ranks? entered\b|\bno rank is missing\b", re.I)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("ranks", [8, 64])
def test_no_localization_finding_says_a_culprit_entered_the_collective(
    jobs: Jobs, scenario: str, ranks: int
) -> None:
    _, _, doc = jobs.get(scenario, ranks)
    culprits = set(doc["localization"].get("culprit_ranks") or [])
    if not culprits:
        pytest.skip(f"{scenario}: the verdict names no culprit rank")
    for f in doc.get("findings") or []:
        if f.get("phase") != "localization":
            continue
        text = f"{f.get('title', '')} {f.get('detail', '')}"
        if ENTERED.search(text) and not NEVER.search(text):
            # "Every rank entered" names every rank, whichever ranks the finding lists.
            named = culprits if EVERY.search(text) else culprits & set(f.get("ranks") or [])
            assert not named, (
                f"{scenario}/{ranks}: {f['kind']} says rank(s) {sorted(named)} entered the "
                f"collective, but the verdict calls them culprit: {f['title']}"
            )


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_proposed_five_whys_never_list_noise_as_a_factor(jobs: Jobs, scenario: str) -> None:
    _, _, doc = jobs.get(scenario, 8)
    noise = {f["title"] for f in doc.get("findings") or [] if "noise" in str(f.get("kind"))}
    for chain in (doc.get("proposals") or {}).get("five_whys") or []:
        assert not noise & set(chain.get("contributing_factors") or []), chain["title"]
        for level in chain.get("levels") or []:
            # A Why is a question about one event, not a cut-off fragment of it.
            assert not re.search(r"\d[:T]\)?\?$|\(\w+ [^)]*$", level["why"]), level["why"]
