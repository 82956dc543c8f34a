"""The naming rules of make:job / make:cron, from the runtime's naming.py."""

from __future__ import annotations

import pytest

from workergen_runtime import naming


@pytest.mark.parametrize(
    ("typed", "kind", "source", "test", "class_name", "task", "packages"),
    [
        (
            "Invoice",
            "job",
            "billing/jobs/invoice.py",
            "tests/jobs/test_invoice.py",
            "InvoiceJob",
            "billing.invoice",
            [],
        ),
        (
            "invoice",
            "job",
            "billing/jobs/invoice.py",
            "tests/jobs/test_invoice.py",
            "InvoiceJob",
            "billing.invoice",
            [],
        ),
        (
            "InvoiceJob",
            "job",
            "billing/jobs/invoice.py",
            "tests/jobs/test_invoice.py",
            "InvoiceJob",
            "billing.invoice",
            [],
        ),
        (
            "invoice-job",
            "job",
            "billing/jobs/invoice.py",
            "tests/jobs/test_invoice.py",
            "InvoiceJob",
            "billing.invoice",
            [],
        ),
        (
            "invoice_job",
            "job",
            "billing/jobs/invoice.py",
            "tests/jobs/test_invoice.py",
            "InvoiceJob",
            "billing.invoice",
            [],
        ),
        (
            " SendInvoice ",
            "job",
            "billing/jobs/send_invoice.py",
            "tests/jobs/test_send_invoice.py",
            "SendInvoiceJob",
            "billing.send_invoice",
            [],
        ),
        (
            "send invoice",
            "job",
            "billing/jobs/send_invoice.py",
            "tests/jobs/test_send_invoice.py",
            "SendInvoiceJob",
            "billing.send_invoice",
            [],
        ),
        (
            "HTTPRetry",
            "job",
            "billing/jobs/http_retry.py",
            "tests/jobs/test_http_retry.py",
            "HttpRetryJob",
            "billing.http_retry",
            [],
        ),
        (
            "billing/refund",
            "job",
            "billing/jobs/billing/refund.py",
            "tests/jobs/billing/test_refund.py",
            "RefundJob",
            "billing.billing.refund",
            ["billing/jobs/billing/__init__.py"],
        ),
        (
            "Billing/RefundJob",
            "job",
            "billing/jobs/billing/refund.py",
            "tests/jobs/billing/test_refund.py",
            "RefundJob",
            "billing.billing.refund",
            ["billing/jobs/billing/__init__.py"],
        ),
        (
            "a/b/c",
            "job",
            "billing/jobs/a/b/c.py",
            "tests/jobs/a/b/test_c.py",
            "CJob",
            "billing.a.b.c",
            ["billing/jobs/a/__init__.py", "billing/jobs/a/b/__init__.py"],
        ),
        (
            "PurgeSessions",
            "cron",
            "billing/crons/purge_sessions.py",
            "tests/crons/test_purge_sessions.py",
            "PurgeSessionsCron",
            "billing.crons.purge_sessions",
            [],
        ),
        (
            "purge_sessions_cron",
            "cron",
            "billing/crons/purge_sessions.py",
            "tests/crons/test_purge_sessions.py",
            "PurgeSessionsCron",
            "billing.crons.purge_sessions",
            [],
        ),
        (
            "job_board",
            "job",
            "billing/jobs/job_board.py",
            "tests/jobs/test_job_board.py",
            "JobBoardJob",
            "billing.job_board",
            [],
        ),
    ],
)
def test_names_normalize_to_one_module_class_and_task(
    typed, kind, source, test, class_name, task, packages
):
    name = naming.normalize_name(typed, kind)

    assert name.source_path("billing") == source
    assert name.test_path() == test
    assert name.class_name == class_name
    assert name.task_name("billing") == task
    assert name.package_paths("billing") == packages


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("class", "keyword"),
        ("Import", "keyword"),
        ("match", "keyword"),
        ("core", "reserved"),
        ("jobs", "reserved"),
        ("crons", "reserved"),
        ("tests", "reserved"),
        ("celery", "reserved"),
        ("Job", "reserved"),
        ("core/x", "reserved"),
        ("../x", "leaves the jobs/ folder"),
        ("a/../../x", "leaves the jobs/ folder"),
        ("./x", "leaves the jobs/ folder"),
        ("/etc/passwd", "absolute path"),
        ("~/x", "absolute path"),
        ("C:/x", "absolute path"),
        ("a\\b", "separate nested names with '/'"),
        ("a//b", "empty segment"),
        ("a/", "empty segment"),
        ("9lives", "valid module name"),
        ("_private", "valid module name"),
        ("a.b", "valid module name"),
        ("héllo", "valid module name"),
        ("{{ x }}", "valid module name"),
    ],
)
def test_bad_names_are_refused_with_a_reason(typed, says):
    with pytest.raises(naming.InvalidNameError) as caught:
        naming.normalize_name(typed, "job")

    assert says in str(caught.value)
