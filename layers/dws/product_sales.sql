-- Sales per product from the order detail: sum/min/max/avg merged from CDC deltas.
SELECT pid,
       count(*)      AS orders,
       sum(onum)     AS units,
       sum(amount)   AS revenue,
       min(onum)     AS min_units,
       max(onum)     AS max_units,
       avg(onum)     AS avg_units
FROM   dwd.order_detail
GROUP  BY pid
