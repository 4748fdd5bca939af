from django.urls import path

from apps.investigation import views

app_name = "investigation"

urlpatterns = [
    path("charts/", views.incident_charts, name="charts"),
    path("hypotheses/", views.hypothesis_add, name="hypothesis_add"),
    path("hypotheses/<str:hcode>/", views.hypothesis_edit, name="hypothesis_edit"),
    path("hypotheses/<str:hcode>/test/", views.hypothesis_test, name="hypothesis_test"),
    path("proposals/<str:kind>/<str:pid>/accept/", views.proposal_accept, name="proposal_accept"),
    path(
        "proposals/<str:kind>/<str:pid>/dismiss/", views.proposal_dismiss, name="proposal_dismiss"
    ),
    path("whys/", views.why_chain_add, name="why_chain_add"),
    path("whys/<str:wcode>/steps/", views.why_step_add, name="why_step_add"),
    path("whys/<str:wcode>/choose/", views.why_chain_choose, name="why_chain_choose"),
    path("whys/<str:wcode>/steps/<int:step_id>/", views.why_step_change, name="why_step_change"),
    path("factors/", views.factor_add, name="factor_add"),
    path("factors/<int:factor_id>/", views.factor_change, name="factor_change"),
    path("fixes/", views.fix_add, name="fix_add"),
    path("fixes/<str:fcode>/applied/", views.fix_applied, name="fix_applied"),
    path("fixes/<str:fcode>/verify/", views.fix_verify, name="fix_verify"),
    path("actions/", views.action_add, name="action_add"),
    path("actions/seed/", views.actions_seed, name="actions_seed"),
    path("actions/<str:acode>/", views.action_update, name="action_update"),
]
