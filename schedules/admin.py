"""The schedules' admin: the one admin that edits, for operators expect to
pause a schedule there. Its form is checked by `rules.clean`, the API's own
rules, and its saves go through the services, so the worker's loop hears of
each change at once."""

from __future__ import annotations

import time
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages

from core.admin_base import when
from core.errors import InvalidSchedule
from core.seams import take_saved_row
from schedules import rules, services
from schedules.models import Schedule


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = rules.FIELDS

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data  # a field's own type error first
        data["callback_url"] = data.get("callback_url") or None  # a blank box: no webhook
        if self.instance._state.adding and Schedule.objects.count() >= settings.SCHEDULES_MAX:
            # Said here to the operator; `services.create_schedule` enforces it in the save's own transaction.
            self.add_error(None, services.too_many().message)
            return data
        try:
            fields = rules.clean({name: data.get(name) for name in rules.FIELDS})
            rules.check_callback_allowed_sync(fields["callback_url"])
        except InvalidSchedule as refused:
            self.add_error(refused.field if refused.field in self.fields else None, refused.why)
            return data
        data.update(fields)
        return data


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = (
        "name", "cron", "timezone", "next_fire", "paused", "fired", "skipped", "missed", "refused", "last_refused", "last_error",
    )
    list_filter = ("paused", "overlap", "plugin")
    search_fields = ("id", "name", "plugin")
    actions = ("pause", "resume")
    readonly_fields = (
        "id", "next_fire", "last_fired", "last_job_id", "fired", "skipped", "missed", "refused", "last_refused", "last_error",
        "created", "updated",
    )
    fieldsets = (
        (None, {"fields": ("name", "cron", "timezone", "page_id", "plugin", "params", "paused")}),
        ("Each fire's job", {"fields": ("callback_url", "result_ttl", "queue_timeout", "priority", "retry", "retry_backoff")}),
        ("Overlap and catch-up", {"fields": ("overlap", "catchup_s")}),
        ("Fires", {"fields": readonly_fields}),
    )

    @admin.display(description="next fire", ordering="next_fire_at")
    def next_fire(self, schedule: Schedule) -> str:
        return "paused" if schedule.paused else when(schedule.next_fire_at)

    @admin.display(description="last fired")
    def last_fired(self, schedule: Schedule) -> str:
        return when(schedule.last_fired_at)

    @admin.display(description="last refused", ordering="last_refused_at")
    def last_refused(self, schedule: Schedule) -> str:
        return when(schedule.last_refused_at)

    @admin.display(description="created")
    def created(self, schedule: Schedule) -> str:
        return when(schedule.created_at)

    @admin.display(description="updated")
    def updated(self, schedule: Schedule) -> str:
        return when(schedule.updated_at)

    def save_model(self, request: Any, obj: Schedule, form: ScheduleForm, change: bool) -> None:
        fields = {name: form.cleaned_data[name] for name in rules.FIELDS}
        if change:
            saved = services.update_schedule(schedule_id=obj.id, fields=fields, now=time.time())
        else:
            saved = services.create_schedule(fields=fields, now=time.time())
        take_saved_row(obj, saved)  # the admin's messages and redirect read the saved row

    def delete_model(self, request: Any, obj: Schedule) -> None:
        services.delete_schedule(schedule_id=obj.id)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        for schedule_id in list(queryset.values_list("id", flat=True)):
            services.delete_schedule(schedule_id=schedule_id)

    @admin.action(description="Pause the selected schedules")
    def pause(self, request: Any, queryset: Any) -> None:
        self._set_paused(request, queryset, paused=True)

    @admin.action(description="Resume the selected schedules (each fires next at its first instant from now)")
    def resume(self, request: Any, queryset: Any) -> None:
        self._set_paused(request, queryset, paused=False)

    def _set_paused(self, request: Any, queryset: Any, *, paused: bool) -> None:
        now = time.time()
        names = [services.set_paused(name_or_id=schedule.id, paused=paused, now=now).name for schedule in queryset]
        self.message_user(request, f"{'Paused' if paused else 'Resumed'}: {', '.join(names) or 'none'}.", messages.SUCCESS)
