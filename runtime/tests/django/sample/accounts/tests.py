import pytest

from accounts.jobs.welcome import welcome
from accounts.models import Account


@pytest.mark.django_db
def test_a_new_account_is_welcomed(run_jobs_eagerly, django_capture_on_commit_callbacks):
    account = Account.objects.create(email="ada@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        welcome.dispatch(account.pk)
    account.refresh_from_db()
    assert account.welcomed


@pytest.mark.django_db
def test_a_failing_job_fails_the_test(run_jobs_eagerly, django_capture_on_commit_callbacks):
    with pytest.raises(Account.DoesNotExist), django_capture_on_commit_callbacks(execute=True):
        welcome.dispatch(123456)
