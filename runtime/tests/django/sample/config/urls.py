from accounts.views import sign_up
from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("sign-up", sign_up),
]
