"""A table of SQL fixtures → expected strategy, reason and key (no Spark)."""

from __future__ import annotations

import pytest

from framework.transform.strategy import analyze

KEYS = {"ods.user": ("id",), "ods.user_order": ("id",), "ods.product": ("pid",), "ods.customer": ("cust_id",),
        "ods.customer_site": ("site_id",), "ods.sales_order_all": ("order_id",)}

CASES = [
    ("select count(1) as num, device_model from ods.user group by device_model", "aggregate", "merge signed deltas", ("device_model",)),
    ("select id, name, upper(email) as email from ods.user where device_model is not null", "rowwise", "upsert changed keys", ("id",)),
    ("select id as user_id, name from ods.user", "rowwise", "upsert changed keys", ("user_id",)),
    ("select * from ods.user where age > 18", "rowwise", "upsert changed keys", ("id",)),
    ("select name from ods.user", "full", "upstream key is not projected", None),
    ("select pid, sum(onum) as total, min(onum) as lo, max(onum) as hi, avg(onum) as mean from ods.user_order group by pid having sum(onum) > 10", "aggregate", "AVG/MAX/MIN/SUM", ("pid",)),
    ("select uid, count(distinct pid) as n from ods.user_order group by uid", "rescan", "COUNT(DISTINCT pid) is not a mergeable aggregate", ("uid",)),
    ("select count(*) from ods.user_order group by uid", "full", "GROUP BY expression is not in the select list", None),
    ("select c.cust_id, count(o.order_id) as order_count from ods.customer c join ods.customer_site cs on c.cust_id = cs.cust_id join ods.sales_order_all o on o.site_id = cs.site_id group by c.cust_id", "rescan", "joins 3 tables", ("cust_id",)),
    ("select distinct device_model from ods.user", "rescan", "DISTINCT", ("device_model",)),
    ("select id, row_number() over (partition by device_model order by id) as rn from ods.user", "full", "window function", None),
    ("select id, rand() as r from ods.user", "full", "non-deterministic rand()", None),
    ("select id from ods.user limit 10", "full", "LIMIT", None),
    ("select id from ods.user union all select id from ods.user_order", "full", "UNION", None),
    ("select count(*) as n from ods.user", "full", "aggregate without GROUP BY", None),
]


@pytest.mark.parametrize(("sql", "strategy", "reason", "key"), CASES)
def test_inferred_strategy(sql: str, strategy: str, reason: str, key: tuple[str, ...] | None) -> None:
    a = analyze(sql, KEYS.get)
    assert a.strategy == strategy, a.reason
    assert reason in a.reason
    assert a.key == key


def test_aggregate_state_and_finalize() -> None:
    a = analyze("select pid, sum(onum) as total, count(*) as n, avg(onum) as mean, max(onum) - min(onum) as spread from ods.user_order where onum > 0 group by pid having count(*) > 1", KEYS.get)
    assert [g for g in a.group_by] == [("pid", "pid")]
    assert [x.func for x in a.aggregates] == ["sum", "count_star", "avg", "max", "min"]
    assert a.where_sql == "onum > 0"
    assert a.finalize["n"] == "_lake_rows"
    assert "_lake_m3" in a.finalize["spread"] and "_lake_m4" in a.finalize["spread"]
    assert a.having_sql == "_lake_rows > 1"


def test_yaml_override_is_checked() -> None:
    sql = "select count(1) as num, device_model from ods.user group by device_model"
    assert analyze(sql, KEYS.get, override="full").strategy == "full"
    assert analyze(sql, KEYS.get, override="rescan").strategy == "rescan"
    with pytest.raises(ValueError, match="not possible"):
        analyze("select id, name from ods.user", KEYS.get, override="aggregate")
    j = "select c.cust_id, count(*) as n from ods.customer c join ods.customer_site s on c.cust_id = s.cust_id group by c.cust_id"
    assert analyze(j, KEYS.get, declared_key=["cust_id"]).key == ("cust_id",)
