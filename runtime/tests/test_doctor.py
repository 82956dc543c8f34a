"""`doctor`'s checks of the app's own configuration, without a broker."""

from workergen_runtime.celery_app import app
from workergen_runtime.ops import doctor
from workergen_runtime.settings import Settings


def test_the_project_configuration_passes_the_checks_that_need_no_broker() -> None:
    settings = Settings(queue_namespace="ventas")
    conf = app.conf
    assert doctor.check_serialization(conf).ok
    assert doctor.check_acknowledgement(conf).ok
    assert doctor.check_time_limits(settings, conf, {}).ok


def test_accepting_pickle_fails_and_says_how_to_fix_it() -> None:
    check = doctor.check_serialization({**app.conf, "accept_content": ["json", "pickle"]})
    assert not check.ok
    assert "pickle" in check.detail and "accept_content" in check.detail
    # The runtime sets JSON only: the project is told to remove its own change.
    assert "remove the project's change" in check.fix


def test_early_acknowledgement_fails() -> None:
    check = doctor.check_acknowledgement({**app.conf, "task_acks_late": False})
    assert not check.ok and "task_acks_late" in check.detail


def test_a_queue_outside_the_namespace_fails() -> None:
    settings = Settings(queue_namespace="ventas")
    conf = {**app.conf, "control_exchange": "celery"}
    check = doctor.check_namespace(settings, conf)
    assert not check.ok and "control_exchange" in check.detail
