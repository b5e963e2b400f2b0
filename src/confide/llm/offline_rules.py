"""The offline extractor's rule table: regular expressions over one clause of user speech.

The rules live in topic modules and run in this order; a rule's match claims its span so
later, vaguer rules do not read the same words again (unless ``overlap`` is set):

* ``offline_rules_people``: names, family, pets;
* ``offline_rules_life``: places, home, mobility and hearing, work and life history;
* ``offline_rules_health``: appointments and visits, health, sleep, pain, feelings;
* ``offline_rules_habits``: likes and dislikes, routines, context, age.

Shared vocabulary and helpers are in ``offline_vocab``.
"""

from __future__ import annotations

from confide.llm.offline_rules_habits import HABIT_RULES
from confide.llm.offline_rules_health import HEALTH_RULES
from confide.llm.offline_rules_life import LIFE_RULES
from confide.llm.offline_rules_people import PEOPLE_RULES
from confide.llm.offline_vocab import Rule, slug

__all__ = ["RULES", "Rule", "slug"]

RULES: tuple[Rule, ...] = PEOPLE_RULES + LIFE_RULES + HEALTH_RULES + HABIT_RULES
