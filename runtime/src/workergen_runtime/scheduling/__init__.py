"""Crons, their schedules, and the scheduler that fires them under a leader lock."""
