from django.db import transaction
from django.http import HttpRequest, JsonResponse

from accounts.jobs.welcome import welcome
from accounts.models import Account


def sign_up(request: HttpRequest) -> JsonResponse:
    """Create an account and welcome it, in one transaction; ?fail=1 rolls it back."""
    try:
        with transaction.atomic():
            account = Account.objects.create(email=request.GET["email"])
            welcome.dispatch(account.pk)
            if request.GET.get("fail"):
                raise RuntimeError("sign-up failed after the dispatch")
    except RuntimeError:
        return JsonResponse({"created": False}, status=500)
    return JsonResponse({"created": True, "id": account.pk})
