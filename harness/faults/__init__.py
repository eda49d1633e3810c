"""Faults: the kinds as data, their actions, schedules and the nemesis that plays them."""
