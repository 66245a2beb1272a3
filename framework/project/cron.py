"""Crontab text → APScheduler 3 ``CronTrigger``, with crontab's weekday numbers.

APScheduler 3 numbers weekdays from Monday (0 = Monday) even in ``CronTrigger.from_crontab``
(agronholm/apscheduler#286, fixed only in 4.x), while crontab and Airflow use 0 = Sunday: taken
as-is, `0 2 * * 1` would run on Tuesdays. The day-of-week field is therefore expanded here to
weekday names, which both read the same way. Every other field goes to APScheduler's own parser.
"""

from __future__ import annotations

from apscheduler.triggers.cron import CronTrigger

_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _day(token: str) -> int:
    t = token.strip().lower()
    if t in _DAYS:
        return _DAYS.index(t)
    if t.isdigit() and int(t) <= 7:
        return int(t) % 7
    raise ValueError(f"day of week {token!r} is not 0-7 or sun-sat")


def weekdays(field: str) -> str:
    """A crontab day-of-week field as APScheduler weekday names.

    Example:
        >>> weekdays("1-5")
        'mon,tue,wed,thu,fri'
        >>> weekdays("*/2")
        'sun,tue,thu,sat'
        >>> weekdays("*")
        '*'
    """
    if field == "*":
        return field
    days: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"day of week step {step_text!r} is not a positive number")
            step = int(step_text)
        if base == "*":
            first, last = 0, 6
        elif "-" in base:
            a, b = base.split("-", 1)
            first, last = _day(a), _day(b)
            if b.strip() == "7":
                last = 7  # `5-7` is Friday to Sunday
        else:
            first = _day(base)
            last = 6 if step_text else first
        if first > last:
            raise ValueError(f"day of week range {base!r} runs backwards")
        days |= {d % 7 for d in range(first, last + 1, step)}
    return ",".join(_DAYS[d] for d in sorted(days))


def cron_trigger(expr: str, timezone: str) -> CronTrigger:
    """Parse 5 crontab fields, or 6 with seconds first; ValueError says what is wrong."""
    fields = expr.split()
    if len(fields) not in (5, 6):
        raise ValueError(f"{len(fields)} fields; a crontab has 5 (6 with seconds first)")
    second = fields.pop(0) if len(fields) == 6 else "0"
    minute, hour, day, month, dow = fields
    if day != "*" and dow != "*":
        raise ValueError("restrict day of month or day of week, not both (crontab runs on either, "
                         "APScheduler only on both)")
    values = {"second": second, "minute": minute, "hour": hour, "day": day, "month": month,
              "day_of_week": weekdays(dow)}
    for name, value in values.items():  # one at a time, so the error names the field
        try:
            CronTrigger(**{name: value}, timezone=timezone)
        except ValueError as e:
            raise ValueError(f"{name.replace('_', ' ')} {value!r}: {e}") from e
    return CronTrigger(**values, timezone=timezone)


def has_seconds(expr: str) -> bool:
    return len(expr.split()) == 6
