from django.db import models


class Account(models.Model):
    email = models.EmailField(unique=True)
    welcomed = models.BooleanField(default=False)
    # What the jobs saw, for the tests: the connection they ran on, a note.
    note = models.CharField(max_length=200, blank=True)


class Tick(models.Model):
    """One run of the scheduled job `accounts.tick`."""

    at = models.DateTimeField(auto_now_add=True)
